#!/usr/bin/env bash
# Single-replica training throughput and peak RSS of mirrored (oneDNN / cuDNN)
# next to PyTorch training the same model, batch, optimizer and thread count.
# One process per cell, alternating mirrored and PyTorch so both see the
# same machine load.
#
#   bench/compute/compare.sh [BUILD_DIR] [--device cpu|gpu] [--threads N] [--seconds S]
set -euo pipefail
build=${1:-build}
shift || true
device=cpu threads=2 seconds=8
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
bench="$build/bin/compute_bench"
[ -x "$bench" ] || { echo "compare.sh: $bench not built (cmake --build $build --target compute_bench)" >&2; exit 2; }
export OMP_NUM_THREADS=$threads
echo "# mirrored compute_bench vs PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')," \
     "device $device, $threads threads, ${seconds}s per cell, Adam 1e-3, Fashion-MNIST; $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '# %-7s %6s | %12s %10s | %12s %10s | %7s\n' model batch "mirrored/s" "RSS MiB" "pytorch/s" "RSS MiB" ratio
for model in mlp cnn resnet; do
  for batch in 64 256; do
    ours=$("$bench" --model "$model" --batch "$batch" --seconds "$seconds" --device "$device" --threads "$threads")
    theirs=$(/usr/bin/python3 "$here/torch_bench.py" --model "$model" --batch "$batch" --seconds "$seconds" \
             --device "$device" --threads "$threads")
    read -r _ _ _ _ ours_sps ours_rss _ <<<"$ours"
    read -r _ _ _ _ torch_sps torch_rss <<<"$theirs"
    ratio=$(awk -v a="$ours_sps" -v b="$torch_sps" 'BEGIN { printf "%.2f", a / b }')
    printf '  %-7s %6s | %12s %10s | %12s %10s | %7s\n' "$model" "$batch" "$ours_sps" "$ours_rss" "$torch_sps" \
           "$torch_rss" "$ratio"
  done
done
