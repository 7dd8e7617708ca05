#!/usr/bin/env bash
# Keras loads what mirrored exports: short jobs (mlp, cnn, a --model-json
# model with BatchNormalization) under mirrored-launch with an evaluator,
# then tf_keras (the interop venv, scripts/interop-venv.sh) builds each
# RUN_DIR/export/model.json, loads model.weights.h5 and must reproduce the
# evaluator's test accuracy within 1e-4 (and its loss closely); and
# `mirrored-worker --export` of the same checkpoint writes the same files.
# keras3-mlp (not in the default list): a model JSON Keras 3's to_json()
# wrote, trained with --model-json, exported, then built and loaded by
# Keras 3 (model_from_json, load_weights), which must reproduce the same.
# Skips (exit 77, CTest's SKIP_RETURN_CODE) when pip cannot reach the
# package index.
#   run_keras_load_interop.sh BIN_DIR [MODEL...]    (default: mlp cnn resnet keras-bn; or keras3-mlp)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rc=0
python=$("$here/../../scripts/interop-venv.sh") || rc=$?
if ((rc == 3)); then echo "SKIPPED: no package index to make the interop venv"; exit 77; fi
((rc == 0)) || { echo "FAILED: scripts/interop-venv.sh exit $rc" >&2; exit 1; }
exec "$python" "$here/keras_load_interop.py" "$@"
