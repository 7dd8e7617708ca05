"""Keras 3's model.fit under MultiWorkerMirroredStrategy: the failure that
docs/user-programs.md describes (TensorFlow 2.21.0, Keras 3.15.1: "Attempt
to convert a value (PerReplica:{...}) ... to a Tensor" at the first step).
The interop_keras3_fit_fails test expects it to fail, so that a Keras that
fixes it is noticed and the page updated. keras_mwms_train.py is the
working way: tf_keras with TF_USE_LEGACY_KERAS=1.
"""
import os

os.environ["TF_USE_LEGACY_KERAS"] = "0"  # tf.keras is Keras 3
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

print(f"tensorflow {tf.__version__}, keras {keras.__version__}", flush=True)
strategy = tf.distribute.MultiWorkerMirroredStrategy()
rng = np.random.default_rng(1)
data = tf.data.Dataset.from_tensor_slices((rng.random((1024, 784), dtype=np.float32),
                                           rng.integers(0, 10, 1024))).repeat().batch(128)
with strategy.scope():
    inputs = keras.Input(shape=(784,))
    model = keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Dense(256, activation="relu")(inputs)))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(data, epochs=1, steps_per_epoch=5, verbose=2)
print("fit done", flush=True)
