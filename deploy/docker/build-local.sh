#!/usr/bin/env bash
# Builds mirrored's image with podman and no registry: the two base images
# come from this machine's Debian mirror and CUDA toolkit, then
# deploy/docker/Dockerfile builds on them. Idempotent: bases already in the
# store are reused, and podman's layer cache and a ccache keep a rebuild
# after a source change to what changed. Needs root, podman, buildah, runc
# and (for the first base) debootstrap: scripts/install-deps.sh --test.
#
#   deploy/docker/build-local.sh STORE [--tag NAME]     # default tag localhost/mirrored:local
#   deploy/docker/build-local.sh STORE --from-build build   # binaries from a host build
#   . STORE/env.sh && podman run --rm localhost/mirrored:local --version
#
# Everything lives under STORE: podman's storage (STORE/storage, STORE/run),
# its configuration (containers.conf, storage.conf, networks/), the ccache
# the build stage compiles with (STORE/ccache), and env.sh, which points
# podman and buildah at them. The CUDA toolkit is $CUDA_HOME (default
# /usr/local/cuda); the mirror is $MIRRORED_DEBIAN_MIRROR, else apt's.
#
# --from-build DIR skips the Dockerfile's build stage: the binaries of a
# build tree made on this machine (scripts/build.sh; Debian 12, as the
# image) are installed stripped, with the CUDA libraries they load and the
# list of Debian packages owning the others (collect-runtime.sh, run here),
# into an image passed as BINARIES. Only the Debian base is needed then.
set -euo pipefail
usage="usage: build-local.sh STORE [--tag NAME] [--from-build DIR]"
store=${1:?$usage}
shift
tag=localhost/mirrored:local
from_build=
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=${2:?$usage}; shift 2 ;;
    --from-build) from_build=$(cd "${2:?$usage}" && pwd) || exit 2; shift 2 ;;
    *) echo "build-local.sh: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
repo=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "build-local: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (rootful podman: the rootless setup does not run on these machines)"
for tool in podman buildah runc; do
  command -v "$tool" > /dev/null || die "$tool is missing (scripts/install-deps.sh --test installs it)"
done

mkdir -p "$store"
store=$(cd "$store" && pwd)
mkdir -p "$store/ccache" "$store/networks"
# crun, podman's default runtime on Debian, fails on these VMs (setrlimit
# RLIMIT_NOFILE, cgroups v1 hybrid mode), and the default ulimits exceed the
# hard limits here; runc with limits within them works.
cat > "$store/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[network]
network_config_dir = "$store/networks"
CONF
cat > "$store/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$store/storage"
runroot = "$store/run"
CONF
cat > "$store/env.sh" <<ENV
# podman and buildah on the store of deploy/docker/build-local.sh
export CONTAINERS_CONF=$store/containers.conf CONTAINERS_STORAGE_CONF=$store/storage.conf
ENV
# shellcheck source=/dev/null
. "$store/env.sh"
# One build per store at a time; a build that was interrupted leaves its
# working containers behind, which this one removes.
exec 9> "$store/.lock"
flock 9
buildah rm --all > /dev/null 2>&1 || true

debian_base=localhost/mirrored-debian:bookworm
cuda_home=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
[ -x "$cuda_home/bin/nvcc" ] || die "no CUDA toolkit at $cuda_home (set CUDA_HOME)"
cuda_version=$("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
cuda_base=localhost/mirrored-cuda-devel:$cuda_version-bookworm

apt_mirror() {
  [ -n "${MIRRORED_DEBIAN_MIRROR:-}" ] && { echo "$MIRRORED_DEBIAN_MIRROR"; return; }
  # shellcheck disable=SC2016  # apt's own format fields, not the shell's
  apt-get indextargets --format '$(REPO_URI) $(SUITE)' 2>/dev/null \
    | awk '$2 ~ /^(bookworm|oldstable)$/ { print $1; exit }'
}

# Base 1: Debian 12 minbase from the mirror (30-80 s), the runtime stage's
# base and the devel base's root.
make_debian_base() {
  command -v debootstrap > /dev/null || die "debootstrap is missing (scripts/install-deps.sh --test installs it)"
  local mirror rootfs
  mirror=$(apt_mirror)
  [ -n "$mirror" ] || die "no bookworm mirror in apt's sources; set MIRRORED_DEBIAN_MIRROR"
  rootfs=$store/rootfs.tmp
  rm -rf "$rootfs"
  say "debootstrap bookworm from $mirror"
  debootstrap --variant=minbase --include=passwd bookworm "$rootfs" "$mirror" > "$store/debootstrap.log" 2>&1 \
    || { tail -n 20 "$store/debootstrap.log" >&2; die "debootstrap failed (log: $store/debootstrap.log)"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --quiet --change 'CMD ["/bin/bash"]' - "$debian_base" > /dev/null
  rm -rf "$rootfs"
}

# Base 2: base 1 plus what the build stage needs of the toolkit: nvcc and
# NVVM, the headers, and the libraries the binaries link or load (CUDA
# runtime, cuBLAS, cuDNN, NCCL, NVRTC), not cuFFT, cuSPARSE, cuSOLVER, cuRAND,
# CUPTI and the profilers.
make_cuda_base() {
  local ctr mnt
  ctr=$(buildah from "$debian_base")
  mnt=$(buildah mount "$ctr")
  mkdir -p "$mnt/usr/local/$(basename "$cuda_home")"
  tar -C "$cuda_home" -c \
      --exclude='lib/libcufft*' --exclude='lib/libcusolver*' --exclude='lib/libcusparse*' \
      --exclude='lib/libcurand*' --exclude='lib/libcupti*' --exclude='lib/libnvperf*' \
      --exclude='lib/libnvblas*' --exclude='lib/libcheckpoint*' --exclude='lib/libpcsamplingutil*' \
      --exclude='lib/libcudnn_adv*' --exclude='lib/*_static.a' --exclude='lib/*_static_*.a' \
      --exclude='dist-info' --exclude='lib/libcudart_static.a' . \
    | tar -C "$mnt/usr/local/$(basename "$cuda_home")" -x
  # CMake links the CUDA runtime statically by default in its compiler check.
  cp -a "$cuda_home/lib/libcudart_static.a" "$mnt/usr/local/$(basename "$cuda_home")/lib/"
  ln -sfn "$(basename "$cuda_home")" "$mnt/usr/local/cuda"
  echo /usr/local/cuda/lib64 > "$mnt/etc/ld.so.conf.d/cuda.conf"
  chroot "$mnt" ldconfig
  buildah umount "$ctr" > /dev/null
  buildah config --env PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env CUDA_HOME=/usr/local/cuda "$ctr"
  buildah commit --quiet --rm "$ctr" "$cuda_base" > /dev/null
}

# The CUDA libraries the binaries load, as the build stage collects them,
# in an image of their own (/out/cuda, 1.3 GB), made once per toolkit.
make_cuda_libs_image() {
  local ctr mnt
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  CUDA_HOME=$cuda_home "$repo/deploy/docker/collect-runtime.sh" cuda "$mnt/out/cuda" >&2
  buildah umount "$ctr" > /dev/null
  buildah commit --quiet --rm "$ctr" "$cuda_libs" > /dev/null
}

# The binaries of the host build $from_build on top of those: /out as the
# build stage leaves it. Only this small layer is new at each build.
make_binaries_image() {
  local ctr mnt
  [ -f "$from_build/CMakeCache.txt" ] || die "--from-build $from_build: not a CMake build tree"
  ctr=$(buildah from "$cuda_libs")
  mnt=$(buildah mount "$ctr")
  cmake --install "$from_build" --component runtime --strip --prefix "$mnt/out" > /dev/null \
    || die "cmake --install $from_build failed (is it built?)"
  "$repo/deploy/docker/collect-runtime.sh" packages "$mnt/out" "$mnt/out/bin/mirrored-launch" \
    "$mnt/out/bin/mirrored-worker" >&2
  buildah umount "$ctr" > /dev/null
  buildah commit --quiet --rm "$ctr" "$binaries_image" > /dev/null
}

t0=$(date +%s)
if podman image exists "$debian_base"; then say "reusing $debian_base"; else make_debian_base; fi
build_args=(--build-arg RUNTIME_BASE="$debian_base")
binaries_image=localhost/mirrored-binaries:local
cuda_libs=localhost/mirrored-cuda-libs:$cuda_version
if [ -n "$from_build" ]; then
  if podman image exists "$cuda_libs"; then say "reusing $cuda_libs"; else
    say "collecting the CUDA libraries of $cuda_home"; make_cuda_libs_image
  fi
  say "packing the binaries of $from_build"
  make_binaries_image
  build_args+=(--build-arg BINARIES="$binaries_image")
else
  if podman image exists "$cuda_base"; then say "reusing $cuda_base"; else
    say "making $cuda_base from $cuda_home"; make_cuda_base
  fi
  build_args+=(--build-arg BUILD_BASE="$cuda_base")
fi
t1=$(date +%s)

say "building $tag (bases ready in $((t1 - t0)) s)"
podman build --format docker --network host --layers \
  --volume "$store/ccache:/ccache" \
  --ignorefile "$repo/deploy/docker/Dockerfile.dockerignore" \
  "${build_args[@]}" \
  -f "$repo/deploy/docker/Dockerfile" -t "$tag" "$repo" >&2
# The binaries are in $tag now; the next build packs its own.
[ -z "$from_build" ] || podman rmi --force "$binaries_image" > /dev/null
t2=$(date +%s)
# Layers of builds superseded a day ago or more (dangling: untagged, no
# children). The build stage's packages and CUDA layers are parents of the
# current build's, so they stay, as the layer cache needs them.
podman image prune --force --filter until=24h > /dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag")
say "built $tag in $((t2 - t1)) s: $((size / 1000000)) MB; store $(du -sh "$store" | cut -f1)"
