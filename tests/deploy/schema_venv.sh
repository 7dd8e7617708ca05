#!/usr/bin/env bash
# Prints the path of a Python with the pinned kubernetes-validate of
# tests/deploy/requirements-schema.txt: a virtual environment, made first if
# it is not there yet (about 20 s; later runs print the path at once).
#
#   python=$(tests/deploy/schema_venv.sh)      # then: "$python" check_manifests.py ...
#
# The venv lives in ${MIRRORED_SCHEMA_VENV:-~/.cache/mirrored/schema-venv}/<hash>
# (scripts/pinned-venv.sh). The base interpreter is $MIRRORED_SCHEMA_PYTHON
# (default /usr/bin/python3). Exit: 0 ready; 3 pip cannot reach the package
# index; 1 anything else.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MIRRORED_VENV_PYTHON=${MIRRORED_SCHEMA_PYTHON:-/usr/bin/python3} exec "$here/../../scripts/pinned-venv.sh" schema-venv \
  "$here/requirements-schema.txt" "${MIRRORED_SCHEMA_VENV:-$HOME/.cache/mirrored/schema-venv}" \
  kubernetes-validate "kubernetes_validate, yaml"
