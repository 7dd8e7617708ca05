#!/usr/bin/env bash
# CTest deploy_k8s_manifests: check_manifests.py with kubernetes-validate from
# the cached venv of schema_venv.sh (made on the first run). Where PyPI cannot
# be reached for that, the structural checks still run under python3, and
# the output says the schema check was left out.
#
#   tests/deploy/check_manifests.sh deploy/kubernetes
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
status=0
python=$("$here/schema_venv.sh") || status=$?
case "$status" in
  0) ;;
  3) python=python3; echo "note: no package index for kubernetes-validate: structural checks only" ;;
  *) echo "FAIL: tests/deploy/schema_venv.sh exited $status (above)" >&2; exit 1 ;;
esac
exec "$python" "$here/check_manifests.py" "$@"
