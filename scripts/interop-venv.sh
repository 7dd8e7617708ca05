#!/usr/bin/env bash
# Prints the path of the interop tests' Python: a virtual environment with
# the pinned TensorFlow of tests/programs/requirements-tf.txt, made first if
# it is not there yet (a few minutes; later runs print the path at once).
#
#   python=$(scripts/interop-venv.sh)       # then: "$python" train.py ...
#
# The venv lives in ${MIRRORED_INTEROP_VENV:-~/.cache/mirrored/interop-venv}/<hash>,
# keyed by the requirements file's hash, so a changed pin makes a new one.
# The base interpreter is $MIRRORED_INTEROP_PYTHON (default /usr/bin/python3,
# which needs Debian's python3-venv). PyTorch is not in it: the torch tests
# use Debian's python3-torch through /usr/bin/python3.
# Exit: 0 ready; 3 pip cannot reach the package index (tests skip on it);
# 1 anything else.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
requirements=$here/tests/programs/requirements-tf.txt
base=${MIRRORED_INTEROP_VENV:-$HOME/.cache/mirrored/interop-venv}
base_python=${MIRRORED_INTEROP_PYTHON:-/usr/bin/python3}
key=$(sha256sum "$requirements" | cut -c1-16)
venv=$base/$key
say() { echo "interop-venv: $*" >&2; }

if [ -f "$venv/.complete" ]; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$base"
# One maker at a time: tests started together wait for the first one.
exec 9> "$base/.lock"
flock 9
if [ -f "$venv/.complete" ]; then
  echo "$venv/bin/python"
  exit 0
fi

start=$(date +%s)
rm -rf "$venv"
say "making $venv from $requirements (a few minutes, once)"
"$base_python" -m venv "$venv" || {
  say "cannot make a venv with $base_python (on Debian: apt-get install python3-venv)"
  exit 1
}
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
# A small download first, so that "no index" is told apart from a failed install.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if ! probe_out=$("${pip[@]}" download --no-deps --dest "$probe" --timeout 20 --retries 1 \
      "$(grep -m1 '^tf_keras==' "$requirements")" 2>&1); then
  rm -rf "$venv"
  say "pip cannot reach the package index (PyPI); the interop tests need it once to make this venv"
  say "  $(tail -n 1 <<<"$probe_out")"
  exit 3
fi
if ! "${pip[@]}" install --no-deps --requirement "$requirements" >&2; then
  rm -rf "$venv"
  say "pip install --no-deps -r $requirements failed (above)"
  exit 1
fi
if ! "$venv/bin/python" -c 'import tensorflow, tf_keras' 2>/dev/null; then
  rm -rf "$venv"
  say "the new venv cannot import tensorflow and tf_keras: python -c 'import tensorflow, tf_keras' fails"
  exit 1
fi
touch "$venv/.complete"
say "made $venv in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"
for other in "$base"/*/; do
  [ "${other%/}" = "$venv" ] || say "note: $other is a venv for other pins; remove it to free its space"
done
echo "$venv/bin/python"
