#!/usr/bin/env bash
# A cached virtual environment with the pinned packages of a requirements
# file (each installed with --no-deps), keyed by the file's hash so that a
# changed pin makes a new one; prints its python. Made once (one maker at a
# time, under a lock), then printed at once. Used by interop-venv.sh and
# tests/deploy/schema_venv.sh.
#
#   python=$(scripts/pinned-venv.sh NAME REQUIREMENTS BASE_DIR PROBE_PACKAGE IMPORTS)
#
# NAME prefixes its messages; PROBE_PACKAGE is downloaded first, so that "no
# package index" is told apart from a failed install; IMPORTS ("a, b") must
# import in the new venv. The base interpreter is $MIRRORED_VENV_PYTHON
# (default /usr/bin/python3, which needs Debian's python3-venv).
# Exit: 0 ready; 3 pip cannot reach the package index; 1 anything else.
set -euo pipefail
name=$1 requirements=$2 base=$3 probe_package=$4 imports=$5
base_python=${MIRRORED_VENV_PYTHON:-/usr/bin/python3}
venv=$base/$(sha256sum "$requirements" | cut -c1-16)
say() { echo "$name: $*" >&2; }
ready() { [ -f "$venv/.complete" ] && echo "$venv/bin/python"; }

ready && exit 0
mkdir -p "$base"
exec 9> "$base/.lock"   # tests started together wait for the first maker
flock 9
ready && exit 0

start=$(date +%s)
rm -rf "$venv"
say "making $venv from $requirements (once)"
"$base_python" -m venv "$venv" || { say "cannot make a venv with $base_python (on Debian: apt-get install python3-venv)"; exit 1; }
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if ! out=$("${pip[@]}" download --no-deps --dest "$probe" --timeout 20 --retries 1 \
      "$(grep -m1 "^$probe_package==" "$requirements")" 2>&1); then
  rm -rf "$venv"
  say "pip cannot reach the package index (PyPI); it is needed once to make this venv"
  say "  $(tail -n 1 <<< "$out")"
  exit 3
fi
if ! "${pip[@]}" install --no-deps --requirement "$requirements" >&2; then
  rm -rf "$venv"
  say "pip install --no-deps -r $requirements failed (above)"
  exit 1
fi
if ! "$venv/bin/python" -c "import $imports" 2>/dev/null; then
  rm -rf "$venv"
  say "the new venv cannot import $imports"
  exit 1
fi
touch "$venv/.complete"
say "made $venv in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"
for other in "$base"/*/; do
  [ "${other%/}" = "$venv" ] || say "note: $other is a venv for other pins; remove it to free its space"
done
echo "$venv/bin/python"
