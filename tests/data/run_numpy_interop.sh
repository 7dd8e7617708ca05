#!/usr/bin/env bash
# NumPy's own files train in mirrored-worker: np.savez (uint8 images, int64
# labels), a directory of np.save'd arrays (float32 N x H x W images, int32
# N x 1 labels), and Keras' layout of each; np.savez_compressed is refused
# (exit 2) saying to use np.savez. Skips (exit 77, CTest's SKIP_RETURN_CODE)
# without numpy.
#   run_numpy_interop.sh BIN_DIR
set -euo pipefail
bin=$1
py=${MIRRORED_PYTHON:-python3}
if ! "$py" -c "import numpy" 2>/dev/null; then
  echo "SKIPPED: $py has no numpy"; exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" - "$dir" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
def split(n, classes, shape, dtype):
    y = np.arange(n) % classes
    x = (y.reshape((n,) + (1,) * len(shape)) * 50 + rng.integers(0, 20, (n,) + shape)).astype(dtype)
    return x, y
x_train, y_train = split(40, 4, (12, 10, 3), np.uint8)
x_test, y_test = split(16, 4, (12, 10, 3), np.uint8)
np.savez(os.path.join(d, "data.npz"), x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
np.savez_compressed(os.path.join(d, "small.npz"), x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
os.makedirs(os.path.join(d, "npy"))
xf, yf = split(40, 3, (11, 11), np.float32)
np.save(os.path.join(d, "npy", "x_train.npy"), (xf / 255.0).astype(np.float32))
np.save(os.path.join(d, "npy", "y_train.npy"), yf.astype(np.int32).reshape(-1, 1))
np.save(os.path.join(d, "npy", "x_test.npy"), (xf[:16] / 255.0).astype(np.float32))
np.save(os.path.join(d, "npy", "y_test.npy"), yf[:16].astype(np.int32).reshape(-1, 1))
PY
train() {
  MIRRORED_DATA_CACHE=off timeout 120 "$bin/mirrored-worker" --device cpu --max-steps 4 --batch-per-replica 8 "$@"
}
out=$(train --data "$dir/data.npz" --model mlp 2>&1) || { echo "$out"; echo "FAILED: np.savez data" >&2; exit 1; }
grep -q "^done: 4 steps" <<<"$out" || { echo "$out"; echo "FAILED: no done line for np.savez data" >&2; exit 1; }
out=$(train --data "$dir/npy" --model cnn 2>&1) || { echo "$out"; echo "FAILED: np.save directory" >&2; exit 1; }
grep -q "^done: 4 steps" <<<"$out" || { echo "$out"; echo "FAILED: no done line for the .npy directory" >&2; exit 1; }
set +e
out=$(train --data "$dir/small.npz" --model mlp 2>&1)
rc=$?
set -e
if [ "$rc" != 2 ] || ! grep -q "member x_train.npy: compressed (np.savez_compressed).*save with np.savez" <<<"$out"; then
  echo "$out"; echo "FAILED: np.savez_compressed: exit $rc, expected 2 saying to use np.savez" >&2; exit 1
fi
echo "numpy interop: np.savez, np.save directory and the np.savez_compressed refusal all as expected"
