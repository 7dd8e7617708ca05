#!/usr/bin/env bash
# The fair PyTorch peer for the benchmarks: PyPI's current torch (MKL +
# oneDNN) in a bench-only venv, ~/.cache/mirrored/bench-torch-venv (the
# default wheel pulls CUDA packages, ~5 GB: fine here, never in CI).
# Prints the venv's python; idempotent.
#   TORCH_PYTHON=$(bench/training/torch_venv.sh) bench/training/compare.sh build
set -euo pipefail
venv=${MIRRORED_BENCH_TORCH_VENV:-$HOME/.cache/mirrored/bench-torch-venv}
if ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check torch numpy >&2 || {
    echo "torch_venv.sh: pip could not install torch into $venv (is PyPI reachable?)" >&2; exit 3; }
fi
echo "$venv/bin/python"
