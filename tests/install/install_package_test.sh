#!/usr/bin/env bash
# `cmake --install` gives a user what the README promises: the binaries, and
# the library API as a CMake package. Installs the build into a temporary
# prefix, builds the installed example (share/mirrored/examples) on its own
# against find_package(mirrored), and runs it as a 2-worker x 2-replica job
# under the installed launcher; then the installed launcher's default worker
# (mirrored-worker beside it) trains a few steps.
#
#   tests/install/install_package_test.sh BUILD_DIR [CMAKE]
set -euo pipefail
build=$(readlink -f "$1")
cmake=${2:-cmake}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" \
  || { cat "$tmp/install.log"; fail "cmake --install $build"; }
for f in bin/mirrored-launch bin/mirrored-worker lib/cmake/mirrored/mirroredConfig.cmake \
         lib/cmake/mirrored/mirroredConfigVersion.cmake lib/libmirrored_train.a lib/libmirrored_strategy.a include/mirrored/mirrored/mirrored.h \
         include/mirrored/worker/strategy/mirrored_strategy.h include/mirrored/mirrored/config.h \
         include/mirrored/proto/coordination.pb.h \
         share/mirrored/examples/custom_training_loop/CMakeLists.txt; do
  [ -e "$tmp/prefix/$f" ] || fail "not installed: $f"
done
# Nothing from the source or build tree leaks into the installed package.
if grep -rlE "$(readlink -f "$build")|$(readlink -f "$(dirname "$0")/../..")/(common|worker|proto)" \
     "$tmp/prefix/lib/cmake/mirrored"; then
  fail "the installed CMake package names paths in the source or build tree"
fi
echo "ok: installed into $tmp/prefix"

# A user's project: only the installed prefix, no access to the source tree.
example="$tmp/prefix/share/mirrored/examples/custom_training_loop"
"$cmake" -S "$example" -B "$tmp/user-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 \
  || { cat "$tmp/configure.log"; fail "configure the installed example with find_package(mirrored)"; }
"$cmake" --build "$tmp/user-build" -j2 >"$tmp/build.log" 2>&1 \
  || { tail -40 "$tmp/build.log"; fail "build the installed example"; }
echo "ok: the installed example builds against find_package(mirrored)"

rc=0
out=$(timeout 120 "$tmp/prefix/bin/mirrored-launch" local --workers 2 --cpu-replicas 3 --run-dir "$tmp/run-example" \
        --worker-binary "$tmp/user-build/custom_training_loop" -- --steps 100 2>&1) || rc=$?
[ "$rc" = 0 ] || { echo "$out" | tail -30; fail "the example as a 2-worker job exited $rc"; }
echo "$out" | grep -E '^\[worker:0\] step 100 loss [0-9.]+ accuracy [0-9.]+$' \
  || { echo "$out" | tail -30; fail "no step-100 line from the example's chief"; }
grep -q 'all 2 tasks registered.*6 replicas' <<<"$out" \
  || { echo "$out" | tail -30; fail "the example's job did not form 6 replicas over 2 tasks (the launcher's --cpu-replicas 3)"; }
# Its progress lines are line-buffered: they come before the job's end, not with it.
step=$(echo "$out" | grep -n '^\[worker:0\] step 50 ' | cut -d: -f1)
barrier=$(echo "$out" | grep -n 'exit barrier passed' | cut -d: -f1)
[ -n "$step" ] && [ -n "$barrier" ] && [ "$step" -lt "$barrier" ] \
  || { echo "$out" | tail -30; fail "the example's step-50 line came after the exit barrier (buffered output)"; }
"$tmp/user-build/custom_training_loop" --help | grep -- '--cpu-replicas N' > /dev/null \
  || fail "the example's --help does not print its usage"
echo "ok: the installed example ran as 2 workers x 3 replicas"

# The worker beside the installed launcher, whatever the environment names.
rc=0
out=$(env -u MIRRORED_WORKER_BINARY timeout 120 "$tmp/prefix/bin/mirrored-launch" local --workers 1 --cpu-replicas 2 \
        --run-dir "$tmp/run-worker" -- --model mlp --max-steps 10 --no-validate 2>&1) || rc=$?
[ "$rc" = 0 ] || { echo "$out" | tail -30; fail "the installed launcher + worker exited $rc"; }
[ -f "$tmp/run-worker/checkpoints/ckpt-10/model.safetensors" ] \
  || { echo "$out" | tail -30; fail "the installed worker wrote no ckpt-10"; }
echo "ok: the installed launcher started the installed worker (ckpt-10 written)"
