#!/usr/bin/env bash
# A real job's files open in the tools users already have: TensorBoard's
# reader lists the chief's and the evaluator's scalars at their steps, and
# the safetensors package loads the final checkpoint with the right names,
# shapes and step count. Installs tensorboard / safetensors / numpy with pip
# only if the python3 on PATH lacks them.
#   run_outputs_interop.sh BIN_DIR
set -euo pipefail
bin=$1
py=${MIRRORED_PYTHON:-python3}
for pkg in tensorboard safetensors numpy; do
  if ! "$py" -c "import $pkg" 2>/dev/null; then
    "$py" -m pip install --quiet --disable-pip-version-check "$pkg" || {
      echo "FAILED: cannot install $pkg with $py -m pip" >&2; exit 1; }
  fi
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 120 "$bin/mirrored-launch" local --workers 2 --evaluator --run-dir "$dir/run" -- \
  --model mlp --max-steps 20 --checkpoint-every 10 --log-every 5 --poll-interval 0.1 > "$dir/out" 2>&1 || {
  cat "$dir/out"; echo "FAILED: the job did not succeed" >&2; exit 1; }
"$py" - "$dir/run" <<'PY'
import sys
from tensorboard.backend.event_processing import event_accumulator
from safetensors.numpy import load_file

run = sys.argv[1]
def scalars(sub):
    acc = event_accumulator.EventAccumulator(run + "/logs/" + sub, size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [e.step for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}

train = scalars("train")
for tag in ("loss", "accuracy", "samples_per_sec", "step_time_ms", "learning_rate"):
    assert train.get(tag) == [5, 10, 15, 20], (tag, train.get(tag))
assert train["val_accuracy"] == [20], train
ev = scalars("eval")
assert ev == {"loss": [10, 20], "accuracy": [10, 20]}, ev  # the chief's tags: drawn in the same charts

model = load_file(run + "/checkpoints/ckpt-20/model.safetensors")
shapes = {k: v.shape for k, v in model.items()}
assert shapes == {"dense1/kernel": (784, 256), "dense1/bias": (256,), "dense2/kernel": (256, 256),
                  "dense2/bias": (256,), "dense3/kernel": (256, 10), "dense3/bias": (10,)}, shapes
opt = load_file(run + "/checkpoints/ckpt-20/optimizer.safetensors")
assert int(opt["iterations"]) == 20, opt["iterations"]
assert set(opt) == {k + s for k in shapes for s in ("/m", "/v")} | {"iterations"}, sorted(opt)
print("tensorboard and safetensors read the job's files:", sorted(train), sorted(ev), len(model), "tensors")
PY

# A run that died after logging steps 15 and 20 but before checkpointing 20
# (ckpt-20 removed), resumed from ckpt-10: its new event file starts with a
# SessionLog START at step 11, so TensorBoard shows steps 15 and 20 once, from
# the resumed run, as it does for TensorFlow's restarts; metrics.jsonl the same.
rm -rf "$dir/run/checkpoints/ckpt-20" "$dir/run/checkpoints/training-done"
sleep 1  # not a synchronisation: event file names carry their creation second, and the new one must sort last
timeout 120 "$bin/mirrored-launch" local --workers 2 --run-dir "$dir/run" -- \
  --model mlp --max-steps 20 --checkpoint-every 10 --log-every 5 > "$dir/out2" 2>&1 || {
  cat "$dir/out2"; echo "FAILED: the resumed job did not succeed" >&2; exit 1; }
grep -q "resuming from .*ckpt-10" "$dir/out2" || { cat "$dir/out2"; echo "FAILED: did not resume from ckpt-10" >&2; exit 1; }
"$py" - "$dir/run" <<'PY'
import sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1] + "/logs/train", size_guidance={"scalars": 0})
acc.Reload()
steps = [e.step for e in acc.Scalars("loss")]
assert steps == [5, 10, 15, 20], steps
print("after the resume, tensorboard shows each step once:", steps)
# metrics.jsonl too: the first run's lines for steps 15 and 20 were removed
# when the second resumed from ckpt-10, the eval line of the lost ckpt-20
# with them (the second run has no evaluator to evaluate its new ckpt-20).
import json
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
by_kind = lambda k: [l["step"] for l in lines if l["kind"] == k]
assert by_kind("train") == [5, 10, 15, 20], by_kind("train")
assert by_kind("validation") == [20], by_kind("validation")
assert by_kind("eval") == [10], by_kind("eval")
print("and metrics.jsonl lists each step once:", by_kind("train"))
PY

# An evaluator after that resume: its lease says ckpt-20 was evaluated, but
# the job started again from ckpt-10, so it evaluates the new ckpt-20; then
# one that lost its lease evaluates both again. Each writes a SessionLog
# START first (at 11, then at 10): TensorBoard shows each eval step once.
evaluator_config='{"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}}'
for round in resumed lease-lost; do
  [ "$round" = lease-lost ] && echo garbage > "$dir/run/checkpoints/eval-lease"
  sleep 1  # not a synchronisation: event file names carry their creation second, and the new one must sort last
  TF_CONFIG=$evaluator_config timeout 60 "$bin/mirrored-worker" --run-dir "$dir/run" --poll-interval 0.1 \
    > "$dir/out-$round" 2>&1 || { cat "$dir/out-$round"; echo "FAILED: the $round evaluator did not succeed" >&2; exit 1; }
  grep -q "evaluated final checkpoint ckpt-20" "$dir/out-$round" || {
    cat "$dir/out-$round"; echo "FAILED: the $round evaluator did not evaluate ckpt-20" >&2; exit 1; }
done
"$py" - "$dir/run" <<'PY'
import json, sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1] + "/logs/eval", size_guidance={"scalars": 0})
acc.Reload()
steps = {t: [e.step for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
assert steps == {"loss": [10, 20], "accuracy": [10, 20]}, steps
evals = [json.loads(l)["step"] for l in open(sys.argv[1] + "/metrics.jsonl") if '"kind":"eval"' in l]
assert evals == [10, 20], evals
print("evaluated again after a resume and a lost lease, tensorboard shows each eval step once:", steps["loss"])
PY

# docs/checkpoints-and-evaluator.md's "What a checkpoint holds" is enough to use the weights
# elsewhere: numpy alone, following its layout (HWIO kernels, [in, units]
# dense kernels, NHWC flatten order, pixels / 255), reproduces the
# evaluator's test-set loss and accuracy for a cnn checkpoint.
timeout 120 "$bin/mirrored-launch" local --workers 2 --evaluator --run-dir "$dir/cnn" -- \
  --model cnn --max-steps 20 --no-validate --poll-interval 0.1 > "$dir/out3" 2>&1 || {
  cat "$dir/out3"; echo "FAILED: the cnn job did not succeed" >&2; exit 1; }
"$py" - "$dir/cnn" "${MIRRORED_DATA_DIR:-/usr/share/datasets/fashion-mnist}" <<'PY'
import gzip, json, sys
import numpy as np
from safetensors.numpy import load_file

run, data = sys.argv[1], sys.argv[2]
def idx(name):
    raw = gzip.open(data + "/" + name).read()
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(raw[3])]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)
x_all = idx("t10k-images-idx3-ubyte.gz").astype(np.float32)[..., None] / 255  # NHWC
y_all = idx("t10k-labels-idx1-ubyte.gz").astype(np.int64)
evals = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"kind":"eval"' in l]
final = [e for e in evals if e["step"] == 20]
assert final, evals
w = load_file(run + "/checkpoints/ckpt-20/model.safetensors")

def conv_relu(x, k, b):  # valid padding, stride 1; k is HWIO
    win = np.lib.stride_tricks.sliding_window_view(x, k.shape[:2], axis=(1, 2))  # n, h', w', c, kh, kw
    return np.maximum(np.einsum("nhwcij,ijco->nhwo", win, k, optimize=True) + b, 0)
def pool(x):
    n, h, wd, c = x.shape
    return x[:, :h // 2 * 2, :wd // 2 * 2].reshape(n, h // 2, 2, wd // 2, 2, c).max(axis=(2, 4))

loss_sum, correct = 0.0, 0
for i in range(0, len(y_all), 1000):
    x, y = x_all[i:i + 1000], y_all[i:i + 1000]
    h = pool(conv_relu(x, w["conv1/kernel"], w["conv1/bias"]))
    h = pool(conv_relu(h, w["conv2/kernel"], w["conv2/bias"]))
    h = h.reshape(len(h), -1)  # NHWC flattened in (H, W, C) order
    h = np.maximum(h @ w["dense1/kernel"] + w["dense1/bias"], 0)
    logits = (h @ w["dense2/kernel"] + w["dense2/bias"]).astype(np.float64)
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    loss_sum -= logp[np.arange(len(y)), y].sum()
    correct += int((logits.argmax(axis=1) == y).sum())
loss, acc = loss_sum / len(y_all), correct / len(y_all)
e = final[0]
print("numpy from ckpt-20: loss %.5f accuracy %.4f; the evaluator: loss %.5f accuracy %.4f" % (loss, acc, e["loss"], e["accuracy"]))
assert abs(loss - e["loss"]) < 1e-3 * max(1.0, e["loss"]), (loss, e["loss"])
assert abs(acc - e["accuracy"]) <= 2e-4, (acc, e["accuracy"])
PY
