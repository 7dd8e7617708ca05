#!/usr/bin/env bash
# mirrored-worker's learning-rate schedules step by step against tf_keras's
# schedule objects (the interop venv, scripts/interop-venv.sh) and PyTorch's
# schedulers (Debian's python3-torch, where installed). Skips (exit 77,
# CTest's SKIP_RETURN_CODE) when pip cannot reach the package index to make
# the venv; without python3-torch only the torch half is left out.
#   run_schedule_interop.sh SCHEDULE_TABLE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
table=$1
rc=0
python=$("$here/../../scripts/interop-venv.sh") || rc=$?
if ((rc == 3)); then echo "SKIPPED: no package index to make the interop venv"; exit 77; fi
((rc == 0)) || { echo "FAILED: scripts/interop-venv.sh exit $rc" >&2; exit 1; }
"$python" "$here/schedule_interop.py" "$table" keras
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$here/schedule_interop.py" "$table" torch
else
  echo "SKIPPED: PyTorch (no python3-torch)"
fi
