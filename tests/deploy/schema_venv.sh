#!/usr/bin/env bash
# Prints the path of a Python with the pinned kubernetes-validate of
# tests/deploy/requirements-schema.txt: a virtual environment, made first if
# it is not there yet (about 20 s; later runs print the path at once).
#
#   python=$(tests/deploy/schema_venv.sh)      # then: "$python" check_manifests.py ...
#
# The venv lives in ${MIRRORED_SCHEMA_VENV:-~/.cache/mirrored/schema-venv}/<hash>,
# keyed by the requirements file's hash. The base interpreter is
# $MIRRORED_SCHEMA_PYTHON (default /usr/bin/python3, which needs Debian's
# python3-venv). Exit: 0 ready; 3 pip cannot reach the package index; 1
# anything else.
set -euo pipefail
requirements=$(cd "$(dirname "$0")" && pwd)/requirements-schema.txt
base=${MIRRORED_SCHEMA_VENV:-$HOME/.cache/mirrored/schema-venv}
base_python=${MIRRORED_SCHEMA_PYTHON:-/usr/bin/python3}
venv=$base/$(sha256sum "$requirements" | cut -c1-16)
say() { echo "schema-venv: $*" >&2; }

ready() { [ -f "$venv/.complete" ] && echo "$venv/bin/python"; }
ready && exit 0
mkdir -p "$base"
exec 9> "$base/.lock"   # one maker at a time; the others wait for it
flock 9
ready && exit 0

rm -rf "$venv"
"$base_python" -m venv "$venv" || { say "cannot make a venv with $base_python (on Debian: apt-get install python3-venv)"; exit 1; }
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if ! out=$("${pip[@]}" download --no-deps --dest "$probe" --timeout 20 --retries 1 \
      "$(grep -m1 '^kubernetes-validate==' "$requirements")" 2>&1); then
  rm -rf "$venv"
  say "pip cannot reach the package index (PyPI): $(tail -n 1 <<< "$out")"
  exit 3
fi
if ! "${pip[@]}" install --no-deps --requirement "$requirements" >&2 \
   || ! "$venv/bin/python" -c 'import kubernetes_validate, yaml' 2>/dev/null; then
  rm -rf "$venv"
  say "pip install --no-deps -r $requirements failed, or the venv cannot import kubernetes_validate"
  exit 1
fi
touch "$venv/.complete"
say "made $venv ($(du -sh "$venv" | cut -f1))"
echo "$venv/bin/python"
