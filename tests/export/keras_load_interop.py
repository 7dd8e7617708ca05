"""Trains short jobs with mirrored, loads RUN_DIR/export/ in tf_keras (or,
for a model Keras 3 wrote, in Keras 3) and checks Keras' test accuracy and
loss against mirrored's evaluator.

  keras_load_interop.py BIN_DIR [MODEL...]   MODEL: mlp, cnn, resnet, keras-bn, keras3-mlp
"""
import filecmp
import gzip
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

DATA = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))
# A Functional model Keras 3's own to_json() wrote (tests/model/keras/make_fixtures.py).
KERAS3_MLP = os.path.join(HERE, "..", "model", "keras", "keras3_mlp.json")
STEPS = 40
JOB_TIMEOUT_S = 240


def fail(message, output=""):
    print(output + "\nFAILED: " + message, file=sys.stderr, flush=True)
    sys.exit(1)


def keras_bn_json(path):
    """A Functional tf_keras model with BatchNormalization, a residual Add,
    a Conv2D without bias, Dropout and a softmax output."""
    import tf_keras as keras
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    y = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.Add()([x, y])
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dropout(0.2)(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    with open(path, "w") as f:
        f.write(keras.Model(inputs, outputs, name="bn_net").to_json())


def train(bin_dir, model, tmp):
    run = os.path.join(tmp, model)
    flags = ["--max-steps", str(STEPS), "--batch-per-replica", "32", "--poll-interval", "0.2"]
    if model == "keras-bn":
        keras_bn_json(os.path.join(tmp, "bn.json"))
        flags += ["--model-json", os.path.join(tmp, "bn.json")]
    elif model == "keras3-mlp":
        flags += ["--model-json", KERAS3_MLP]
    else:
        flags += ["--model", model]
    cmd = [os.path.join(bin_dir, "mirrored-launch"), "local", "--workers", "2", "--cpu-replicas", "1",
           "--evaluator", "--run-dir", run, "--"] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    if r.returncode != 0:
        fail(f"{model}: mirrored-launch exited {r.returncode}", r.stdout + r.stderr)
    with open(os.path.join(run, "metrics.jsonl")) as f:
        evals = [json.loads(l) for l in f if '"eval"' in l]
    evals = [e for e in evals if e.get("kind") == "eval" and e["step"] == STEPS]
    if not evals:
        fail(f"{model}: no eval line for step {STEPS} in metrics.jsonl", r.stdout + r.stderr)
    return run, evals[-1]


def idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def safetensors(path):
    """{name: array} of a float32 safetensors file (the format is a JSON header and raw bytes)."""
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name != "__metadata__" and t["dtype"] == "F32":
            begin, end = t["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], np.float32).reshape(t["shape"])
    return out


def check_weights(model, run):
    """Each Keras layer holds its checkpoint tensors (Keras' order: kernel, bias; gamma, beta, moving_mean,
    moving_variance), whatever the forward pass gives: the groups of model.weights.h5 went to the right layers."""
    import numpy as np
    tensors = safetensors(os.path.join(run, "checkpoints", f"ckpt-{STEPS}", "model.safetensors"))
    prefixes = {name.rsplit("/", 1)[0] for name in tensors}
    names = {"Dense": ["kernel", "bias"], "Conv2D": ["kernel", "bias"],
             "BatchNormalization": ["gamma", "beta", "moving_mean", "moving_variance"]}
    checked = 0
    for layer in model.layers:
        if layer.__class__.__name__ not in names:
            continue
        prefix = next(p for p in prefixes if p.replace("/", "_") == layer.name)
        for variable, value in zip(names[layer.__class__.__name__], layer.get_weights()):
            if not np.array_equal(value, tensors[f"{prefix}/{variable}"]):
                fail(f"Keras layer {layer.name}'s {variable} is not the checkpoint's {prefix}/{variable}")
            checked += 1
    if checked != len(tensors):
        fail(f"Keras holds {checked} of the checkpoint's {len(tensors)} tensors")


def keras3_predict(text, weights, x):
    import keras
    model = keras.models.model_from_json(text)
    model.load_weights(weights)
    return model.predict(x, batch_size=1000, verbose=0).astype("float64")


def keras_figures(run, x, y, keras3_wrote_it=False):
    """Keras' accuracy and loss of RUN_DIR/export on the test set: in tf_keras, or in Keras 3 for a model
    JSON Keras 3 wrote (tf_keras cannot read it)."""
    import numpy as np
    if keras3_wrote_it:
        import keras
    else:
        import tf_keras as keras
    export = os.path.join(run, "export")
    with open(os.path.join(export, "model.json")) as f:
        text = f.read()
    model = keras.models.model_from_json(text)
    written = [l["config"]["name"] for l in json.loads(text)["config"]["layers"]]
    built = [l.name for l in model.layers]
    if [n for n in written if n in built] != built:  # the weights file's groups follow model.layers
        fail(f"Keras orders the layers {built}, model.json {written}")
    model.load_weights(os.path.join(export, "model.weights.h5"))
    check_weights(model, run)
    out = model.predict(x, batch_size=1000, verbose=0).astype(np.float64)
    if model.layers[-1].get_config().get("activation") == "softmax":
        log_p = np.log(np.maximum(out, 1e-300))
    else:  # logits, as mirrored's zoo models give
        m = out.max(axis=1, keepdims=True)
        log_p = out - m - np.log(np.exp(out - m).sum(axis=1, keepdims=True))
    if json.loads(text).get("module") and not keras3_wrote_it:  # the zoo's (a tf_keras model's own JSON Keras 3 cannot read)
        # Keras 3 builds it from the same JSON and loads the same file.
        keras3_out = keras3_predict(text, os.path.join(export, "model.weights.h5"), x)
        if not np.allclose(keras3_out, out, rtol=1e-4, atol=1e-4):
            fail("Keras 3 gives other outputs than tf_keras for the same model.json and weights")
    accuracy = float((out.argmax(axis=1) == y).mean())
    loss = float(-log_p[np.arange(len(y)), y].mean())
    return accuracy, loss


def check_export_flag(bin_dir, run, tmp, model):
    """mirrored-worker --export of the final checkpoint writes the same two files."""
    out = os.path.join(tmp, model + "-again")
    ckpt = os.path.join(run, "checkpoints", f"ckpt-{STEPS}")
    r = subprocess.run([os.path.join(bin_dir, "mirrored-worker"), "--export", ckpt, "--export-dir", out],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"{model}: mirrored-worker --export exited {r.returncode}", r.stdout + r.stderr)
    for name in ("model.json", "model.weights.h5"):
        if not filecmp.cmp(os.path.join(run, "export", name), os.path.join(out, name), shallow=False):
            fail(f"{model}: --export's {name} differs from the chief's")


def main():
    bin_dir = sys.argv[1]
    models = sys.argv[2:] or ["mlp", "cnn", "resnet", "keras-bn"]
    x = (idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).astype("float32") / 255.0)[..., None]
    y = idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype("int64")
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            run, ev = train(bin_dir, model, tmp)
            check_export_flag(bin_dir, run, tmp, model)
            accuracy, loss = keras_figures(run, x, y, keras3_wrote_it=model.startswith("keras3-"))
            print(f"{model}: evaluator accuracy {ev['accuracy']:.6f} loss {ev['loss']:.6f}; "
                  f"Keras accuracy {accuracy:.6f} loss {loss:.6f}", flush=True)
            if abs(accuracy - ev["accuracy"]) > 1e-4:
                fail(f"{model}: Keras' accuracy {accuracy} is not the evaluator's {ev['accuracy']}")
            if abs(loss - ev["loss"]) > 1e-3 * max(1.0, ev["loss"]):
                fail(f"{model}: Keras' loss {loss} is not the evaluator's {ev['loss']}")
    print("ok: Keras reproduces the evaluator's accuracy for " + ", ".join(models))


if __name__ == "__main__":
    main()
