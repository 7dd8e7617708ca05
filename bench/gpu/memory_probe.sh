#!/usr/bin/env bash
# Where mirrored's GPU memory goes, one program at a time on an otherwise idle
# GPU: peak device memory (nvidia-smi every 50 ms, less the level before) of
# a bare CUDA context, of the model alone (compute_bench: model, cuDNN and
# cuBLAS handles, no strategy, no NCCL), of mirrored-worker (the model plus
# the strategy: a one-rank NCCL communicator, gradient buckets, prefetch),
# and of PyTorch on the same model. A table in MiB.
#
#   PACK/run bench/gpu/memory_probe.sh PACK [--batch 256] [--models "mlp resnet"]
set -uo pipefail
pack=${1:?usage: memory_probe.sh PACK [--batch B] [--models "..."]}
shift
batch=256 models="mlp resnet"
while [ $# -gt 0 ]; do
  case "$1" in
    --batch) batch=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "memory_probe.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$pack/bin" && pwd) || exit 2
data=${MIRRORED_DATA_DIR:-/usr/share/datasets/fashion-mnist}
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
command -v nvidia-smi > /dev/null || { echo "memory_probe.sh: needs nvidia-smi" >&2; exit 2; }

peak() {  # peak MiB above the idle level while "$@" runs
  local base file pid top
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' ')
  file=$(mktemp)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 50 > "$file" 2>/dev/null &
  pid=$!
  "$@" > "$runs/last.log" 2>&1 || { echo "---- failed: $*" >&2; tail -5 "$runs/last.log" >&2; }
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  top=$(tr -d ' ' < "$file" | grep -E '^[0-9]+$' | sort -n | tail -1)
  rm -f "$file"
  echo $((top - base))
}

echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); batch $batch"
ctx=$(peak python3 -c "import ctypes, time; c = ctypes.CDLL('libcudart.so.13'); assert c.cudaFree(0) == 0; time.sleep(1.5)")
printf "%-8s %12s %14s %16s %12s\n" model cuda_context compute_bench mirrored-worker pytorch
for model in $models; do
  alone=$(peak "$bin/compute_bench" --device gpu --model "$model" --batch "$batch" --seconds 3 --data "$data")
  worker=$(peak "$bin/mirrored-worker" --device gpu --model "$model" --batch-per-replica "$batch" --max-steps 100 \
             --epochs 1000 --log-every 50 --no-validate --data "$data" --run-dir "$runs/$model")
  torch=$(peak env LD_LIBRARY_PATH="${MIRRORED_ORIG_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" python3 \
            "$here/training/torch_gpu_train.py" --model "$model" --batch "$batch" --steps 100 --warmup 20 --data "$data")
  printf "%-8s %12s %14s %16s %12s\n" "$model" "$ctx" "$alone" "$worker" "$torch"
done
echo "# MiB above the idle GPU's level; cuda_context: cudaFree(0) alone, with the pack's libraries"
