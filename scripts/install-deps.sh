#!/usr/bin/env bash
# Installs what mirrored needs to build, test and run its demo, and nothing
# that is already there. Idempotent; runs as root, or through sudo otherwise.
#
#   scripts/install-deps.sh            # build + run dependencies
#   scripts/install-deps.sh --test     # also what the test suite uses
#   scripts/install-deps.sh --bench    # also the peers the benchmarks compare with
set -euo pipefail

want_test=0
want_bench=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    --bench) want_bench=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgloo-dev libdnnl-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libssl-dev libhdf5-dev
  libgtest-dev libgmock-dev
  dataset-fashion-mnist
)
if [ "$want_test" = 1 ]; then
  packages+=(iproute2 procps python3 python3-yaml shellcheck slurmctld slurmd slurm-client munge)
  # The interop tests (tests/programs/): the venv that scripts/interop-venv.sh
  # makes for TensorFlow, and PyTorch 1.13 + torchrun (595 MB, ~2 min of apt).
  # python3-venv also serves the manifests' schema check (tests/deploy/schema_venv.sh).
  packages+=(python3-venv python3-torch)
  # The container tests (tests/deploy/container_test.sh): rootful podman with
  # runc, a bridge network, and debootstrap for the registry-less base image.
  packages+=(podman buildah runc debootstrap containernetworking-plugins iptables)
fi
if [ "$want_bench" = 1 ]; then
  packages+=(bc)
  [ "$want_test" = 1 ] || packages+=(python3-torch)  # PyTorch 1.13 + torchrun: run with /usr/bin/python3
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep '^install ok installed$' > /dev/null; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
