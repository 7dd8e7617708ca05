"""Writes the Keras model JSON fixtures of keras_model_json_test, and
same_padding_conv_reference.json: what TensorFlow computes for "same"
padding (the padding table, and a model's outputs and gradients with fixed
weights) for conv_padding_test.

Each model is built with real tf_keras (Keras 2) and Keras 3 and saved with
model.to_json(), as a user would. The fixtures are committed, so the unit
tests need no Python; run this again after changing a model here:

    python=$(scripts/interop-venv.sh)
    "$python" tests/model/keras/make_fixtures.py tests/model/keras
"""
import json
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def sequential_cnn(k, classes=10):
    L = k.layers
    return k.Sequential([
        L.InputLayer(input_shape=(32, 32, 3)) if k.__name__ == "tf_keras" else L.InputLayer(shape=(32, 32, 3)),
        L.Rescaling(2.0, offset=-1.0),
        L.Conv2D(16, 3, padding="same", activation="relu"),
        L.MaxPooling2D(2),
        L.Conv2D(32, 3, strides=2, padding="valid", activation="relu"),
        L.AveragePooling2D(2),
        L.BatchNormalization(),
        L.Flatten(),
        L.Dropout(0.25),
        L.Dense(64, activation="relu"),
        L.Dense(classes, activation="softmax"),
    ], name="cnn_cifar")


def functional_resnet(k, classes=7):
    L = k.layers

    def block(x, filters, stride, name):
        y = L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=name + "_conv1")(x)
        y = L.BatchNormalization(name=name + "_bn1")(y)
        y = L.ReLU(name=name + "_relu1")(y)
        y = L.Conv2D(filters, 3, padding="same", use_bias=False, name=name + "_conv2")(y)
        y = L.BatchNormalization(name=name + "_bn2")(y)
        if stride != 1 or x.shape[-1] != filters:
            x = L.Conv2D(filters, 1, strides=stride, use_bias=False, name=name + "_proj")(x)
            x = L.BatchNormalization(name=name + "_proj_bn")(x)
        y = L.Add(name=name + "_add")([y, x])
        return L.Activation("relu", name=name + "_out")(y)

    inputs = k.Input(shape=(32, 32, 3), name="image")
    x = L.Conv2D(16, 3, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.Activation("relu", name="stem_relu")(x)
    x = block(x, 16, 1, "block1")
    x = block(x, 32, 2, "block2")
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Dropout(0.1, name="dropout")(x)
    outputs = L.Dense(classes, name="logits")(x)
    return k.Model(inputs, outputs, name="resnet_cifar")


def residual_no_bn(k, classes=7):
    """The equivalence test's model: residual, no BatchNormalization (its
    statistics are per replica, so N replicas differ from one)."""
    L = k.layers
    inputs = k.Input(shape=(32, 32, 3), name="image")
    x = L.Rescaling(1.0 / 0.5, offset=-1.0, name="rescale")(inputs)
    x = L.Conv2D(8, 3, padding="same", activation="relu", kernel_initializer="he_normal", name="stem")(x)
    y = L.Conv2D(8, 3, padding="same", activation="relu", name="res_conv1")(x)
    y = L.Conv2D(8, 3, padding="same", name="res_conv2")(y)
    x = L.ReLU(name="res_relu")(L.Add(name="res_add")([x, y]))
    x = L.AveragePooling2D(2, name="avg")(x)
    x = L.Conv2D(16, 3, strides=2, padding="valid", activation="relu", name="down")(x)
    x = L.MaxPooling2D(2, name="max")(x)
    x = L.Flatten(name="flat")(x)
    x = L.Dropout(0.2, name="drop")(x)
    x = L.Dense(16, activation="relu", name="hidden")(x)
    outputs = L.Dense(classes, activation="softmax", name="probs")(x)
    return k.Model(inputs, outputs, name="residual_cifar")


def same_padding_conv(k):
    """Convolutions whose "same" padding TensorFlow splits unevenly: 3x3
    stride 2 on 10 rows (0 before, 1 after) and 7 columns (1, 1); an even
    2x2 kernel (0, 1) on 8 channels (the GPU's 16-bit path takes those); a
    4x4 kernel at stride 3 (1, 1 on rows; 1, 2 on columns)."""
    L = k.layers
    inputs = k.Input(shape=(10, 7, 3), name="image")
    x = L.Conv2D(8, 3, strides=2, padding="same", name="conv_s2")(inputs)
    x = L.Conv2D(4, 2, padding="same", use_bias=False, name="conv_even")(x)
    x = L.Conv2D(2, 4, strides=3, padding="same", name="conv_k4_s3")(x)
    x = L.Flatten(name="flat")(x)
    outputs = L.Dense(3, name="out")(x)
    return k.Model(inputs, outputs, name="same_padding_conv")


# The padding table: input sizes, kernels and strides whose "same" padding
# TensorFlow itself is asked for.
PADDING_INPUTS, PADDING_KERNELS, PADDING_STRIDES = (28, 14, 7, 5, 1), (1, 2, 3, 5), (1, 2, 3)


def tf_same_padding(tf, size, kernel, stride):
    """[in, kernel, stride, out, before]: TensorFlow's "same" output length
    and padding before, read off a convolution. Pixel i holds i + 1 and
    filter c picks tap c, so output 0's channel c sees pixel c - before
    (0 where that is padding)."""
    x = tf.reshape(tf.range(1, size + 1, dtype=tf.float32), (1, size, 1, 1))
    taps = tf.reshape(tf.eye(kernel), (kernel, 1, 1, kernel))
    y = tf.nn.conv2d(x, taps, strides=(1, stride, 1, 1), padding="SAME").numpy()[0, :, 0, :]
    before = [c + 1 - int(v) for c, v in enumerate(y[0]) if v != 0]
    assert before and len(set(before)) == 1, (size, kernel, stride, y[0])
    return [size, kernel, stride, int(y.shape[0]), before[0]]


def fixed(rng, shape, low, high):
    """Reproducible values that float32 holds exactly (multiples of 1/64)."""
    return (rng.integers(low, high + 1, size=shape) / 64.0).astype(np.float32)


def tensors(model):
    """(mirrored's tensor name "<layer>/<weight>", variable) of each weight."""
    return [(layer.name + "/" + w.name.split("/")[-1].split(":")[0], w)
            for layer in model.layers for w in layer.weights]


def same_padding_reference(tf_keras, keras):
    """What Keras computes for same_padding_conv with fixed weights: the
    outputs, the mean squared error against a fixed target and its
    gradients (Keras' mse: the mean over outputs, then over the batch)."""
    import tensorflow as tf
    rng = np.random.default_rng(24)
    model = same_padding_conv(tf_keras)
    weights = {}
    for name, w in tensors(model):
        weights[name] = fixed(rng, w.shape, -32, 32)
        w.assign(weights[name])
    x = fixed(rng, (2, 10, 7, 3), 0, 64)
    target = fixed(rng, (2, 3), -64, 64)
    with tf.GradientTape() as tape:
        y = model(x, training=True)
        loss = tf_keras.losses.MeanSquaredError()(target, y)
    names, variables = zip(*tensors(model))
    grads = dict(zip(names, tape.gradient(loss, list(variables))))
    other = same_padding_conv(keras)  # Keras 3 computes the same
    for name, w in tensors(other):
        w.assign(weights[name])
    np.testing.assert_allclose(np.asarray(other(x)), y.numpy(), rtol=1e-5, atol=1e-5)
    # float32's shortest decimal: read back as a float32, the same value.
    flat = lambda a: [float(str(v)) for v in np.asarray(a, dtype=np.float32).ravel()]
    return {
        "padding": [tf_same_padding(tf, n, k, s)
                    for n in PADDING_INPUTS for k in PADDING_KERNELS for s in PADDING_STRIDES],
        "input": flat(x),
        "batch": int(x.shape[0]),
        "target": flat(target),
        "weights": {n: flat(w) for n, w in weights.items()},
        "output": flat(y),
        "loss": float(loss),
        "gradients": {n: flat(g) for n, g in grads.items()},
    }


def mlp(k):
    L = k.layers
    inputs = k.Input(shape=(28, 28, 1))
    x = L.Flatten()(inputs)
    x = L.Dense(32)(x)
    x = L.Activation("relu")(x)
    x = L.Dense(10, activation="linear")(x)
    outputs = L.Activation("softmax")(x)
    return k.Model(inputs, outputs, name="mlp_fashion")


def refused(k):
    """Models with one thing mirrored refuses each (test name: model)."""
    L = k.layers
    out = {}
    inputs = k.Input(shape=(32, 32, 3))
    out["unknown_layer"] = k.Model(inputs, L.Dense(10)(L.Flatten()(L.DepthwiseConv2D(3)(inputs))))
    inputs = k.Input(shape=(32, 32, 3))
    out["dilated_conv"] = k.Model(inputs, L.Dense(10)(L.Flatten()(L.Conv2D(8, 3, dilation_rate=2)(inputs))))
    inputs = k.Input(shape=(32, 32, 3))
    out["tanh_dense"] = k.Model(inputs, L.Dense(10)(L.Dense(8, activation="tanh")(L.Flatten()(inputs))))
    inputs = k.Input(shape=(32, 32, 3))
    out["dense_no_bias"] = k.Model(inputs, L.Dense(10, use_bias=False)(L.Flatten()(inputs)))
    inputs = k.Input(shape=(32, 32, 3))
    out["orthogonal_init"] = k.Model(
        inputs, L.Dense(10, kernel_initializer="orthogonal")(L.Flatten()(inputs)))
    inputs = k.Input(shape=(32, 32, 3))
    out["l2_regularizer"] = k.Model(
        inputs, L.Dense(10, kernel_regularizer=k.regularizers.L2(1e-4))(L.Flatten()(inputs)))
    inputs = k.Input(shape=(32, 32, 3))
    out["same_max_pool"] = k.Model(
        inputs, L.Dense(10)(L.Flatten()(L.MaxPooling2D(3, padding="same")(inputs))))
    inputs = k.Input(shape=(32, 32, 3))
    out["dense_on_image"] = k.Model(inputs, L.Dense(10)(inputs))
    if k.__name__ == "keras":
        inputs = k.Input(shape=(32, 32, 3))
        x = L.BatchNormalization(synchronized=True)(L.Conv2D(4, 3)(inputs))
        out["synchronized_batch_norm"] = k.Model(inputs, L.Dense(10)(L.Flatten()(x)))
    return out


def write(directory, name, model, expected=None):
    text = model.to_json()
    json.loads(text)  # what to_json writes is JSON
    with open(os.path.join(directory, name + ".json"), "w") as f:
        f.write(text + "\n")
    if expected is not None:  # what Keras says of the model, for the test to compare
        count = lambda ws: int(sum(int(np.prod(w.shape)) for w in ws))
        expected[name] = {
            "input": [int(d) for d in model.inputs[0].shape[1:]],
            "outputs": int(model.outputs[0].shape[-1]),
            "trainable": count(model.trainable_weights),
            "non_trainable": count(model.non_trainable_weights),
            "tensors": len(model.trainable_weights),
        }


def main():
    directory = sys.argv[1]
    import tf_keras
    import keras
    expected = {}
    for prefix, k in (("tf_keras", tf_keras), ("keras3", keras)):
        write(directory, prefix + "_sequential_cnn", sequential_cnn(k), expected)
        write(directory, prefix + "_functional_resnet", functional_resnet(k), expected)
        write(directory, prefix + "_mlp", mlp(k), expected)
        write(directory, prefix + "_residual_no_bn", residual_no_bn(k), expected)
        write(directory, prefix + "_same_padding_conv", same_padding_conv(k), expected)
        k.backend.clear_session()
        for name, model in refused(k).items():
            write(directory, prefix + "_refused_" + name, model)
    with open(os.path.join(directory, "same_padding_conv_reference.json"), "w") as f:
        json.dump(same_padding_reference(tf_keras, keras), f, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(directory, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print("keras", keras.__version__, "tf_keras", tf_keras.__version__)


if __name__ == "__main__":
    main()
