#!/usr/bin/env bash
# Prints the path of the interop tests' Python: a virtual environment with
# the pinned TensorFlow of tests/programs/requirements-tf.txt, made first if
# it is not there yet (a few minutes; later runs print the path at once).
#
#   python=$(scripts/interop-venv.sh)       # then: "$python" train.py ...
#
# The venv lives in ${MIRRORED_INTEROP_VENV:-~/.cache/mirrored/interop-venv}/<hash>
# (scripts/pinned-venv.sh). The base interpreter is $MIRRORED_INTEROP_PYTHON
# (default /usr/bin/python3). PyTorch is not in it: the torch tests use
# Debian's python3-torch through /usr/bin/python3.
# Exit: 0 ready; 3 pip cannot reach the package index (tests skip on it);
# 1 anything else.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
MIRRORED_VENV_PYTHON=${MIRRORED_INTEROP_PYTHON:-/usr/bin/python3} exec "$here/scripts/pinned-venv.sh" interop-venv \
  "$here/tests/programs/requirements-tf.txt" "${MIRRORED_INTEROP_VENV:-$HOME/.cache/mirrored/interop-venv}" \
  tf_keras "tensorflow, tf_keras"
