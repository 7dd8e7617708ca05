#!/usr/bin/env bash
# Packs mirrored's GPU binaries for a machine that has the CUDA toolkit,
# NCCL and cuDNN but none of our Debian packages (gRPC, Protobuf, Gloo,
# oneDNN, ...): the binaries (debug info stripped), every shared library they
# need except CUDA's and glibc's, Fashion-MNIST, and a wrapper that sets
# LD_LIBRARY_PATH (finding CUDA's libraries there) and runs a command.
#
#   bench/gpu/pack.sh BUILD_DIR OUTDIR [--data DIR | --no-data] [--archive FILE.tar.xz] [--bins "a b"]
#   OUTDIR/run OUTDIR/bin/mirrored-worker --device gpu --max-steps 100    # on the GPU machine
#   OUTDIR/run bench/training/gpu_train.sh OUTDIR                          # tests + throughput table
#
# OUTDIR layout: bin/ (binaries), lib/ (non-CUDA libraries, always used),
# lib-fallback/ (libstdc++, libgcc_s: used only when the machine's own are
# older than the build's), data/ (Fashion-MNIST), run (the wrapper).
# The directory is about 100 MiB (oneDNN alone is 38 MiB, the data 29 MiB),
# over the device tool's 64 MiB carry limit: carry the --archive instead
# (tar.xz, about 45 MiB), e.g. --archive .carry/gpu.tar.xz with OUTDIR outside
# the repository, and on the device: tar -C /tmp -xJf .carry/gpu.tar.xz.
# Check here: OUTDIR/run ldd OUTDIR/bin/mirrored-worker  (non-CUDA libraries resolve into OUTDIR/lib).
set -euo pipefail
usage="usage: pack.sh BUILD_DIR OUTDIR [--data DIR | --no-data] [--archive FILE.tar.xz] [--bins \"a b\"]"
build=${1:?$usage}
out=${2:?$usage}
shift 2
data=/usr/share/datasets/fashion-mnist archive="" with_data=1
bins="mirrored-worker mirrored-launch custom_training_loop compute_bench train_gpu_test nccl_communicator_test model_gpu_test cudnn_layout_bench"
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data=$2; shift 2 ;;
    --no-data) with_data=0; shift ;;
    --archive) archive=$2; shift 2 ;;
    --bins) bins=$2; shift 2 ;;
    *) echo "pack.sh: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
[ -d "$build/bin" ] || { echo "pack.sh: $build/bin does not exist (build first: scripts/build.sh)" >&2; exit 2; }

# Libraries the machine provides: CUDA's (toolkit, NCCL, cuDNN, driver) and
# glibc's. Everything else travels.
is_cuda_lib() { [[ $1 =~ ^lib(cuda|cudart|cublas|cublasLt|nccl|cudnn[a-z_]*|nvrtc|nvJitLink|nvidia-ml)\.so ]]; }
is_glibc_lib() { [[ $1 =~ ^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libmvec)\.so|^ld-linux ]]; }
is_fallback_lib() { [[ $1 =~ ^(libstdc\+\+|libgcc_s)\.so ]]; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/lib-fallback"
declare -A libs=()
for b in $bins; do
  src="$build/bin/$b"
  [ -x "$src" ] || { echo "pack.sh: $src is missing (is MIRRORED_WITH_CUDA on in $build?)" >&2; exit 2; }
  strip --strip-debug -o "$out/bin/$b" "$src"
  chmod +x "$out/bin/$b"
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)"; a "not found" here is a broken build tree.
  if ldd "$src" | grep "not found" > /dev/null; then
    echo "pack.sh: $src has unresolved libraries here:" >&2
    ldd "$src" | grep "not found" >&2
    exit 1
  fi
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] && [ -n "$path" ] && [ -e "$path" ] || continue
    libs[$name]=$path
  done < <(ldd "$src")
done

packed=0 fallback=0 left=()
for name in "${!libs[@]}"; do
  if is_cuda_lib "$name" || is_glibc_lib "$name"; then
    left+=("$name")
  elif is_fallback_lib "$name"; then
    cp -L "${libs[$name]}" "$out/lib-fallback/$name"
    fallback=$((fallback + 1))
  else
    cp -L "${libs[$name]}" "$out/lib/$name"
    strip --strip-debug "$out/lib/$name" 2>/dev/null || true
    packed=$((packed + 1))
  fi
done

if [ "$with_data" = 1 ]; then
  mkdir -p "$out/data"
  for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    [ -f "$data/$f" ] || { echo "pack.sh: $data/$f is missing (--data DIR, or --no-data)" >&2; exit 2; }
    cp "$data/$f" "$out/data/"
  done
fi

cat > "$out/run" <<'WRAPPER'
#!/usr/bin/env bash
# Runs "$@" with this pack's libraries and the machine's CUDA libraries on
# LD_LIBRARY_PATH, MIRRORED_BIN_DIR set to the pack's bin/ and (when packed)
# MIRRORED_DATA_DIR to its data/. Prints what still does not resolve.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dirs=("$here/lib")
# CUDA: the toolkit, the driver's folder, and pip's nvidia-* wheels (cuDNN,
# NCCL, cuBLAS as PyTorch ships them).
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/lib \
         /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$d" ] && dirs+=("$d")
done
if command -v python3 > /dev/null; then
  while IFS= read -r d; do [ -n "$d" ] && dirs+=("$d"); done < <(python3 - <<'PY' 2>/dev/null || true
import glob, site, sys
roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
seen = set()
for r in roots:
    for d in sorted(glob.glob(r + "/nvidia/*/lib")):
        if d not in seen:
            seen.add(d)
            print(d)
PY
)
fi
for d in /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib; do
  [ -d "$d" ] && dirs+=("$d")
done
path=""
for d in "${dirs[@]}"; do
  case ":$path:" in *":$d:"*) ;; *) path="${path:+$path:}$d" ;; esac
done
# What the machine had, for programs that must not see the pack's libraries
# (PyTorch in bench/training/gpu_train.sh).
export MIRRORED_ORIG_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The build's libstdc++ only where the machine's is older (a missing GLIBCXX_/GCC_ version).
if ldd "$here/bin/mirrored-worker" 2>&1 | grep -E "(GLIBCXX|CXXABI|GCC)_[0-9.]+' not found|libstdc\+\+\.so\.6 => not found" > /dev/null; then
  export LD_LIBRARY_PATH="$here/lib-fallback:$LD_LIBRARY_PATH"
fi
export MIRRORED_BIN_DIR="$here/bin"
[ -d "$here/data" ] && export MIRRORED_DATA_DIR="${MIRRORED_DATA_DIR:-$here/data}"
missing=$(for b in "$here"/bin/*; do ldd "$b" 2>&1 | grep -E "not found" || true; done | sort -u)
# Loaded at run time, which ldd cannot see: cuBLAS (dlopen'ed by the GPU
# backend) and cuDNN's sub-libraries; a missing one would only show as a
# thrown error at the first GPU call.
for lib in libcublas.so.13 libcublasLt.so.13 libcudnn_graph.so.9 libcudnn_ops.so.9 libcudnn_cnn.so.9 \
           libcudnn_heuristic.so.9 libcudnn_engines_precompiled.so.9; do
  found=""
  IFS=: read -r -a search <<< "$LD_LIBRARY_PATH"
  for d in "${search[@]}"; do [ -n "$d" ] && [ -e "$d/$lib" ] && { found=1; break; }; done
  [ -n "$found" ] || ldconfig -p 2>/dev/null | grep " $lib " > /dev/null || missing="${missing:+$missing
}	$lib => not found (loaded at run time)"
done
if [ -n "$missing" ]; then
  echo "run: some libraries do not resolve (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):" >&2
  echo "$missing" >&2
  [ -n "${MIRRORED_PACK_IGNORE_MISSING:-}" ] || exit 1
fi
exec "$@"
WRAPPER
chmod +x "$out/run"

echo "pack.sh: $out: $(echo $bins | wc -w) binaries, $packed libraries in lib/, $fallback in lib-fallback/," \
     "$([ "$with_data" = 1 ] && echo "Fashion-MNIST in data/" || echo "no data");" \
     "$(du -sh "$out" | cut -f1) in all"
echo "pack.sh: left to the GPU machine: $(printf '%s\n' "${left[@]}" | sort | tr '\n' ' ')"
if [ -n "$archive" ]; then
  mkdir -p "$(dirname "$archive")"
  tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 > "$archive"
  echo "pack.sh: $archive: $(du -h "$archive" | cut -f1) (tar xJf it, then run the same way)"
  [ "$(du -m "$archive" | cut -f1)" -lt 62 ] ||
    echo "pack.sh: warning: $archive is over 62 MiB: too big to carry to the device machine (try --no-data)" >&2
elif [ "$(du -sm "$out" | cut -f1)" -ge 62 ]; then
  echo "pack.sh: note: $out is over the device tool's 64 MiB carry limit: use --archive" >&2
fi
