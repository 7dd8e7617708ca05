#!/usr/bin/env bash
# TensorFlow's own TFRecord files train in mirrored-worker: tf.io.TFRecordWriter
# output in TF's tutorial layout (image_raw bytes with height, width, depth
# features), float_list images with a shape feature, in shards; a GZIP-
# compressed file is refused (exit 2) naming the file and record 0.
# Python: the interop venv (scripts/interop-venv.sh, TensorFlow); exit 77
# (skipped) when it cannot be made for want of the package index.
#   run_tfrecord_interop.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
set +e
py=$("$src/scripts/interop-venv.sh")
rc=$?
set -e
if [ "$rc" = 3 ]; then echo "SKIPPED: no package index to make the interop venv"; exit 77; fi
[ "$rc" = 0 ] || { echo "FAILED: scripts/interop-venv.sh exited $rc" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
TF_CPP_MIN_LOG_LEVEL=2 "$py" - "$dir" <<'PY'
import os, sys
import numpy as np
import tensorflow as tf
d = sys.argv[1]
rng = np.random.default_rng(0)
def ints(v): return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
def write(path, examples, options=None):
    with tf.io.TFRecordWriter(path, options) as w:
        for e in examples: w.write(e.SerializeToString())
def raw(n, first=0):  # TF's TFRecord tutorial: image_raw, height, width, depth, label
    for i in range(first, first + n):
        y = i % 4
        x = (y * 50 + rng.integers(0, 20, (12, 10, 3))).astype(np.uint8)
        yield tf.train.Example(features=tf.train.Features(feature={
            "height": ints([12]), "width": ints([10]), "depth": ints([3]), "label": ints([y]),
            "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[x.tobytes()]))}))
def floats(n):
    for i in range(n):
        y = i % 3
        x = (y / 3 + rng.random((11, 11)) / 10).astype(np.float32)
        yield tf.train.Example(features=tf.train.Features(feature={
            "shape": ints([11, 11]), "label": ints([y]),
            "image": tf.train.Feature(float_list=tf.train.FloatList(value=x.ravel()))}))
os.makedirs(os.path.join(d, "raw"))
write(os.path.join(d, "raw", "train-00000-of-00002.tfrecord"), raw(24))
write(os.path.join(d, "raw", "train-00001-of-00002.tfrecord"), raw(16, 24))
write(os.path.join(d, "raw", "test.tfrecord"), raw(12))
os.makedirs(os.path.join(d, "float"))
write(os.path.join(d, "float", "train.tfrecords"), floats(40))
write(os.path.join(d, "float", "test.tfrecords"), floats(12))
os.makedirs(os.path.join(d, "gzip"))
write(os.path.join(d, "gzip", "train.tfrecord"), floats(8), tf.io.TFRecordOptions(compression_type="GZIP"))
# TF reads back what it wrote (the reference for the pixels mirrored trains on).
n = sum(1 for _ in tf.data.TFRecordDataset(os.path.join(d, "raw", "test.tfrecord")))
assert n == 12, n
PY
train() {
  MIRRORED_DATA_CACHE=off timeout 120 "$bin/mirrored-worker" --device cpu --max-steps 4 --batch-per-replica 8 "$@"
}
out=$(train --data "$dir/raw" --model cnn 2>&1) || { echo "$out"; echo "FAILED: TF tutorial layout" >&2; exit 1; }
grep -q "^done: 4 steps" <<<"$out" || { echo "$out"; echo "FAILED: no done line for image_raw data" >&2; exit 1; }
out=$(train --data "$dir/float" --model mlp 2>&1) || { echo "$out"; echo "FAILED: float_list images" >&2; exit 1; }
grep -q "^done: 4 steps" <<<"$out" || { echo "$out"; echo "FAILED: no done line for float_list data" >&2; exit 1; }
set +e
out=$(train --data "$dir/gzip" --model mlp --no-validate 2>&1)
rc=$?
set -e
if [ "$rc" != 2 ] || ! grep -q "train.tfrecord: record 0 at byte 0: the file is gzip-compressed" <<<"$out"; then
  echo "$out"; echo "FAILED: a GZIP TFRecord file: exit $rc, expected 2 naming record 0" >&2; exit 1
fi
echo "tfrecord interop: TF's tutorial layout, float_list images and the GZIP refusal all as expected"
