#!/usr/bin/env bash
# Training throughput of mirrored vs PyTorch DDP (Gloo, torchrun) and,
# with TF_PYTHON, TensorFlow's MultiWorkerMirroredStrategy, side by side on
# this machine: same model, per-replica batch, optimizer, replica count, and
# threads per replica (the cores split evenly).
#
#   bench/training/compare.sh BUILD_DIR [--steps 300] [--models "mlp cnn"] [--replicas "1 2 4"]
#   TORCH_PYTHON=$(bench/training/torch_venv.sh) TF_PYTHON=$(scripts/interop-venv.sh) \
#     bench/training/compare.sh BUILD_DIR ...
#
# TORCH_PYTHON is the peer's interpreter: Debian's /usr/bin/python3 (torch
# 1.13 on reference BLAS, run through torchrun_shim.py) by default, or a
# venv with PyPI's torch (MKL + oneDNN: the fair peer; make it with
# bench/training/torch_venv.sh), run with its own torchrun. TF_PYTHON is
# an interpreter with tensorflow-cpu and tf_keras (tf_train.py: one worker
# process per replica, TF_CONFIG on free 127.0.0.1 ports, RING collectives,
# oneDNN ops on, which TensorFlow leaves off by default on CPUs without
# AVX-512 and which were faster here); without it the tf column reads "-".
#
# mirrored runs two ways: one worker with N CPU replicas (threads, shared
# memory reduction) and N workers with one replica each (processes, Gloo).
# samples/s is measured after the first --log-every window (warm-up).
set -euo pipefail
build=${1:?usage: compare.sh BUILD_DIR [--steps N] [--models "..."] [--replicas "..."]}
shift
steps=300 models="mlp cnn" replicas="1 2 4" batch=64
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$build/bin" && pwd)
cores=$(nproc)
warm=$((steps / 5))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# samples/s of the windows after the first, from metrics.jsonl.
mirrored_sps() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = rows[1:] or rows
print("%.1f" % (sum(r["samples_per_sec"] for r in rows) / len(rows)))
PY
}

torch_python=${TORCH_PYTHON:-/usr/bin/python3}
if [ "$torch_python" = /usr/bin/python3 ]; then
  torchrun=("$torch_python" "$here/torchrun_shim.py")  # torchrun 1.13 crashes on Python 3.11 without it
else
  torchrun=("$torch_python" -m torch.distributed.run --standalone)
fi
echo "# training throughput, samples/s; $cores cores; per-replica batch $batch; $steps steps (first $warm warm-up)"
echo "# peer: $("$torch_python" -c 'import torch; print("torch", torch.__version__, "MKL" if torch.backends.mkl.is_available() else "no MKL", "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN")' 2>&1 | tail -1) ($torch_python)"
tf_python=${TF_PYTHON:-}
spe=$(python3 -c "import math; print(math.gcd($warm, $steps))")
if [ -n "$tf_python" ]; then
  export TF_ENABLE_ONEDNN_OPTS=1
  echo "# peer: $("$tf_python" "$here/tf_train.py" --info 2>/dev/null | tail -1), MultiWorkerMirroredStrategy (tf_keras fit, steps_per_execution $spe) ($tf_python)"
fi
echo "# mirrored: oneDNN $(dpkg-query -W -f '${Version}' libdnnl-dev 2>/dev/null || echo '?') (Debian libdnnl) for Conv2D, Dense (matmul); conv kernel gradients with a bias or one input channel im2col + its sgemm; max pooling its own loop (argmax kept, ReLU mask folded in)"
echo "# $(date -u '+%F %H:%M') $(uname -m); load $(cut -d' ' -f1-3 /proc/loadavg); threads per replica = max(1, cores / replicas)"
printf "%-6s %8s %14s %14s %14s %14s %10s %10s %10s\n" model replicas mirrored/thr mirrored/proc ddp/gloo tf/mwms \
  thr/ddp proc/ddp proc/tf
for model in $models; do
  for n in $replicas; do
    threads=$(( cores / n )); [ "$threads" -lt 1 ] && threads=1
    export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=passive
    common=(--model "$model" --max-steps "$steps" --log-every "$warm" --batch-per-replica "$batch" --no-validate)
    rm -rf "$tmp/t" "$tmp/p"
    "$bin/mirrored-worker" "${common[@]}" --cpu-replicas "$n" --run-dir "$tmp/t" > /dev/null 2>&1
    thr=$(mirrored_sps "$tmp/t/metrics.jsonl")
    "$bin/mirrored-launch" local --workers "$n" --cpu-replicas 1 --run-dir "$tmp/p" -- "${common[@]}" > /dev/null 2>&1
    proc=$(mirrored_sps "$tmp/p/metrics.jsonl")
    ddp=$(cd "$tmp" && "${torchrun[@]}" --nproc_per_node "$n" --master_port $((29500 + RANDOM % 1000)) \
            "$here/ddp_train.py" --model "$model" --steps "$steps" --warmup "$warm" --batch-per-replica "$batch" \
            --threads "$threads" 2>/dev/null | awk '/samples_per_sec/ {print $2}')
    tf=- proc_tf=-
    if [ -n "$tf_python" ]; then
      tf=$("$tf_python" "$here/tf_train.py" --workers "$n" --model "$model" --steps "$steps" --warmup "$warm" \
             --batch-per-replica "$batch" --threads "$threads" --steps-per-execution "$spe" 2>/dev/null |
           awk '/samples_per_sec/ {print $2}')
      proc_tf=$(printf "%.2f" "$(echo "$proc / ${tf:-0}" | bc -l 2>/dev/null || echo 0)")
    fi
    printf "%-6s %8d %14s %14s %14s %14s %10.2f %10.2f %10s\n" "$model" "$n" "$thr" "$proc" "$ddp" "${tf:--}" \
      "$(echo "$thr / $ddp" | bc -l)" "$(echo "$proc / $ddp" | bc -l)" "$proc_tf"
  done
done
