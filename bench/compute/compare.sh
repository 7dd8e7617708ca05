#!/usr/bin/env bash
# Single-replica training throughput and peak RSS of mirrored (oneDNN / cuDNN)
# next to PyTorch training the same model, batch, optimizer and thread count.
# One process per cell, alternating mirrored and PyTorch so both see the
# same machine load.
#
#   bench/compute/compare.sh [BUILD_DIR] [--device cpu|gpu] [--threads N] [--seconds S]
#                            [--precision fp32|bf16] [--torch-python PATH]
#
# --precision goes to both sides: bf16 is mirrored's bf16 mode next to
# PyTorch's autocast bf16 (FP32 master weights, no GradScaler). The peer's
# interpreter is --torch-python, else $TORCH_PYTHON, else Debian's
# /usr/bin/python3 (torch 1.13 on reference BLAS); the fair peer is PyPI's
# torch (MKL + oneDNN): --torch-python "$(bench/training/torch_venv.sh)".
set -euo pipefail
build=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then build=$1; shift; fi
device=cpu threads=2 seconds=8 precision=fp32 torch_python=${TORCH_PYTHON:-/usr/bin/python3}
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --torch-python) torch_python=$2; shift 2 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
case "$precision" in
  fp32|bf16) ;;
  *) echo "compare.sh: --precision must be fp32 or bf16, not '$precision'" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
bench="$build/bin/compute_bench"
[ -x "$bench" ] || { echo "compare.sh: $bench not built (cmake --build $build --target compute_bench)" >&2; exit 2; }
torch_version=$("$torch_python" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -1) || {
  echo "compare.sh: $torch_python cannot import torch (make the PyPI one with bench/training/torch_venv.sh)" >&2; exit 2; }
export OMP_NUM_THREADS=$threads
echo "# mirrored compute_bench vs PyTorch $torch_version ($torch_python)," \
     "device $device, precision $precision, $threads threads, ${seconds}s per cell, Adam 1e-3, Fashion-MNIST;" \
     "$(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '# %-7s %6s | %12s %10s | %12s %10s | %7s\n' model batch "mirrored/s" "RSS MiB" "pytorch/s" "RSS MiB" ratio
for model in mlp cnn resnet; do
  for batch in 64 256; do
    ours=$("$bench" --model "$model" --batch "$batch" --seconds "$seconds" --device "$device" --threads "$threads" \
           --precision "$precision")
    theirs=$("$torch_python" "$here/torch_bench.py" --model "$model" --batch "$batch" --seconds "$seconds" \
             --device "$device" --threads "$threads" --precision "$precision")
    read -r _ _ _ _ ours_sps ours_rss _ <<<"$ours"
    read -r _ _ _ _ torch_sps torch_rss <<<"$theirs"
    ratio=$(awk -v a="$ours_sps" -v b="$torch_sps" 'BEGIN { printf "%.2f", a / b }')
    printf '  %-7s %6s | %12s %10s | %12s %10s | %7s\n' "$model" "$batch" "$ours_sps" "$ours_rss" "$torch_sps" \
           "$torch_rss" "$ratio"
  done
done
