#!/usr/bin/env bash
# Run in the image's build stage: sorts out what the binaries need at run
# time, for a runtime stage that has no CUDA of its own. Two steps, so that
# the CUDA libraries (1.3 GB) are copied before the sources and stay in the
# layer cache when only the sources change:
#
#   collect-runtime.sh cuda DIR                 # the CUDA libraries, one file per soname
#   collect-runtime.sh packages OUT BINARY...   # OUT/runtime-packages.txt; checks OUT/cuda
#
# The CUDA libraries are those the binaries link (CUDA runtime, NCCL,
# cuDNN) and those they load later with dlopen, which ldd cannot see: cuBLAS
# and cuBLASLt (the GPU backend, worker/model/cublas_library.h), the cuDNN
# sub-libraries a convolution, batch norm or matmul loads, and NVRTC, which
# cuDNN's runtime-compiled engines compile with. A GPU job (cnn, resnet in
# bf16, mlp in tf32, on an H100) loaded exactly these, NVRTC aside; it loaded
# neither libcudnn_adv (RNNs, attention) nor libnvJitLink, so they stay out.
# `packages` fails if a binary links a CUDA library that `cuda` did not copy,
# or any other library that no package owns (dpkg -S).
set -euo pipefail
usage="usage: collect-runtime.sh cuda DIR | packages OUT BINARY..."
is_cuda_lib() { [[ $(basename "$1") =~ ^lib(cuda|cudart|cublas|cublasLt|nccl|cudnn[a-z_]*|nvrtc[a-z.-]*|nvJitLink)\.so ]]; }
die() { echo "collect-runtime.sh: $*" >&2; exit 1; }

# The path of a library by soname: the toolkit's directory, then the loader's cache.
find_lib() {
  local d
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib"; do
    [ -e "$d/$1" ] && { echo "$d/$1"; return; }
  done
  ldconfig -p | awk -v n="$1" '$1 == n { print $NF; exit }'
}
# The major version of the one libNAME.so.N in the loader's cache.
major_of() {
  ldconfig -p | sed -n "s/^[[:space:]]*$1\\.so\\.\\([0-9]*\\) .*/\\1/p" | sort -u | tail -n 1
}

copy_cuda() {
  local dir=$1 cuda cudnn soname path part builtins
  mkdir -p "$dir"
  cuda=$(major_of libcudart)
  cudnn=$(major_of libcudnn)
  if [ -z "$cuda" ] || [ -z "$cudnn" ]; then
    die "no libcudart/libcudnn in the loader's cache: not a CUDA + cuDNN base?"
  fi
  local wanted=("libcudart.so.$cuda" libnccl.so.2 "libcudnn.so.$cudnn"
                "libcublas.so.$cuda" "libcublasLt.so.$cuda" "libnvrtc.so.$cuda")
  for part in graph ops cnn heuristic engines_precompiled engines_runtime_compiled; do
    wanted+=("libcudnn_$part.so.$cudnn")
  done
  for soname in "${wanted[@]}"; do
    path=$(find_lib "$soname")
    [ -n "$path" ] || die "$soname not found"
    cp -L "$path" "$dir/$soname"
  done
  # NVRTC loads its builtins by their full version (libnvrtc-builtins.so.13.0).
  path=$(readlink -f "$(find_lib "libnvrtc.so.$cuda")")
  builtins=$(find "$(dirname "$path")" -maxdepth 1 -name "libnvrtc-builtins.so.$cuda.*" -not -name '*.alt.*' | sort | head -n 1)
  [ -n "$builtins" ] || die "no libnvrtc-builtins.so.$cuda.* beside $path"
  cp -L "$builtins" "$dir/"
  echo "collect-runtime.sh: CUDA libraries, $(du -sh "$dir" | cut -f1):" \
    "$(find "$dir" -maxdepth 1 -type f -printf '%f\n' | sort | tr '\n' ' ')"
}

list_packages() {
  local out=$1 soname path real owner candidate
  shift
  [ $# -gt 0 ] || die "$usage"
  if ldd "$@" | grep 'not found' >&2; then die "the binaries have unresolved libraries (above)"; fi
  local packages=() unowned=()
  while read -r soname path; do
    if is_cuda_lib "$soname"; then
      [ -f "$out/cuda/$soname" ] || die "the binaries link $soname, which 'collect-runtime.sh cuda' did not copy"
      continue
    fi
    real=$(readlink -f "$path")
    owner=""
    for candidate in "$path" "$real" "/usr$path" "/usr$real" "${path#/usr}" "${real#/usr}"; do
      owner=$(dpkg -S "$candidate" 2>/dev/null | cut -d: -f1 | head -n 1) && [ -n "$owner" ] && break
    done
    if [ -n "$owner" ]; then packages+=("$owner"); else unowned+=("$path"); fi
  done < <(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u)
  [ ${#unowned[@]} -eq 0 ] || die "no package owns ${unowned[*]}: the runtime stage could not install it"
  printf '%s\n' "${packages[@]}" | sort -u > "$out/runtime-packages.txt"
  echo "collect-runtime.sh: packages: $(tr '\n' ' ' < "$out/runtime-packages.txt")"
}

case "${1:-}" in
  cuda) [ $# = 2 ] || die "$usage"; copy_cuda "$2" ;;
  packages) shift; list_packages "$@" ;;
  *) die "$usage" ;;
esac
