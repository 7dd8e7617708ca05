#!/usr/bin/env bash
# On a machine with a GPU: the gpu-labelled tests, then one-GPU training
# throughput of mirrored-worker (--device gpu) against PyTorch on the same GPU
# (when python3 has torch), with each one's peak GPU memory, printed as a table.
#
#   bench/training/gpu_train.sh BUILD_DIR [--steps 300] [--batch 256] [--models "mlp cnn resnet"] [--no-tests]
#   OUTDIR/run bench/training/gpu_train.sh OUTDIR     # a pack from bench/gpu/pack.sh (no Debian packages there)
#   MIRRORED_GPU_LOG_DIR=$OUT ... --no-tests            # keep the logs; tests and table as two calls
#
# BUILD_DIR is a build tree or a pack: its bin/ holds mirrored-worker and the
# test binaries (train_gpu_test, nccl_communicator_test, model_gpu_test).
# Data: --data DIR, else MIRRORED_DATA_DIR (the pack's run wrapper sets it),
# else the Debian Fashion-MNIST location. samples/s is the mean of the
# --log-every windows after the first (warm-up: cuDNN algorithm search,
# allocations). Exit status: 1 when a test failed or a run did not finish.
set -uo pipefail
build=${1:?usage: gpu_train.sh BUILD_DIR [--steps N] [--batch B] [--models "..."] [--data DIR] [--no-tests]}
shift
steps=300 batch=256 models="mlp cnn resnet" tests=1
data=${MIRRORED_DATA_DIR:-/usr/share/datasets/fashion-mnist}
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --no-tests) tests=0; shift ;;
    *) echo "gpu_train.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$build/bin" && pwd) || exit 2
export MIRRORED_BIN_DIR=$bin MIRRORED_DATA_DIR=$data
# Here a GPU is expected: a gpu test that finds none fails instead of skipping.
export MIRRORED_REQUIRE_GPU=1
warm=$((steps / 6)); [ "$warm" -lt 1 ] && warm=1
# Logs of the test binaries and the runs: MIRRORED_GPU_LOG_DIR keeps them
# (on the device machine: $OUT, so they come back), else a temporary folder.
if [ -n "${MIRRORED_GPU_LOG_DIR:-}" ]; then
  tmp=$MIRRORED_GPU_LOG_DIR; mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
fi
runs=$(mktemp -d)  # run directories (checkpoints): never worth carrying back
trap 'rm -rf "$runs"; [ -z "${MIRRORED_GPU_LOG_DIR:-}" ] && rm -rf "$tmp"' EXIT
# NCCL's bootstrap on loopback and no InfiniBand probing: one machine here.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
failed=0

echo "# mirrored GPU check, $(date -u +%FT%TZ), $(uname -m)"
if command -v nvidia-smi > /dev/null; then
  echo "# $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
fi
"$bin/mirrored-worker" --version

if [ "$tests" = 1 ]; then
  echo
  echo "# gpu tests (a failing binary's output goes to stderr)"
  printf "%-26s %8s %8s %8s %9s\n" binary passed failed skipped seconds
  for t in nccl_communicator_test model_gpu_test train_gpu_test; do
    if [ ! -x "$bin/$t" ]; then
      printf "%-26s %8s\n" "$t" missing; failed=1; continue
    fi
    start=$(date +%s)
    # Bounded so that the three binaries fit one 600 s device call (the table is a second call, --no-tests).
    timeout "${MIRRORED_GPU_TEST_TIMEOUT:-150}" "$bin/$t" > "$tmp/$t.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    passed=$(grep -c '^\[       OK \]' "$tmp/$t.log")
    fails=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$tmp/$t.log")
    skipped=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$tmp/$t.log")
    printf "%-26s %8d %8d %8d %9d\n" "$t" "$passed" "$fails" "$skipped" "$secs"
    if [ "$rc" != 0 ] || [ "$fails" != 0 ]; then
      failed=1
      echo "---- $t (exit $rc): failures" >&2
      grep -E -B2 -A25 '^\[ RUN|Failure|FAILED' "$tmp/$t.log" | tail -150 >&2
    fi
    # Figures the tests print (relative errors, abort latency).
    grep -E "relative L2 error|exited .* after worker:1 was killed" "$tmp/$t.log" | sed 's/^/#   /'
  done
fi

# samples/s and ms/step of the windows after the first, from metrics.jsonl.
window_stats() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = rows[1:] or rows
print("%.0f %.2f" % (sum(r["samples_per_sec"] for r in rows) / len(rows),
                     sum(r["step_time_ms"] for r in rows) / len(rows)))
PY
}

# Peak GPU memory while one program runs alone on the GPU: nvidia-smi samples
# the device's used memory every 50 ms; the peak less the level before it
# started, in MiB (the CUDA context included), or "-" without nvidia-smi.
peak_start() {
  peak_file=$(mktemp) peak_pid="" peak_base=0
  command -v nvidia-smi > /dev/null || return 0
  peak_base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | tr -d ' ')
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 50 > "$peak_file" 2>/dev/null &
  peak_pid=$!
}
peak_stop() {
  if [ -z "$peak_pid" ]; then echo -; rm -f "$peak_file"; return; fi
  kill "$peak_pid" 2>/dev/null; wait "$peak_pid" 2>/dev/null
  local top
  top=$(tr -d ' ' < "$peak_file" | grep -E '^[0-9]+$' | sort -n | tail -1)
  rm -f "$peak_file"
  if [ -n "$top" ] && [ -n "$peak_base" ]; then echo $((top - peak_base)); else echo -; fi
}

echo
echo "# one-GPU training throughput: batch $batch, Adam, FP32; $steps steps, the first $warm warm-up"
printf "%-7s %6s %14s %10s %14s %8s %13s %10s\n" model batch mirrored/s ms/step torch/s ratio mirrored_MiB torch_MiB
for model in $models; do
  run="$runs/run-$model"
  peak_start
  # --epochs high enough that --max-steps decides (an epoch is 234 steps at 256).
  if "$bin/mirrored-worker" --device gpu --model "$model" --batch-per-replica "$batch" --max-steps "$steps" --epochs 1000 \
       --log-every "$warm" --no-validate --data "$data" --run-dir "$run" > "$tmp/$model.log" 2>&1; then
    read -r sps ms < <(window_stats "$run/metrics.jsonl")
  else
    echo "---- mirrored-worker --model $model failed:" >&2
    tail -20 "$tmp/$model.log" >&2
    sps=- ms=-; failed=1
  fi
  mem=$(peak_stop)
  # PyTorch with the machine's own libraries, not the pack's (run saves them).
  peak_start
  torch=$(LD_LIBRARY_PATH="${MIRRORED_ORIG_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" python3 "$here/torch_gpu_train.py" --model "$model" --batch "$batch" --steps "$steps" --warmup "$warm" \
            --data "$data" 2>/dev/null | awk '/samples_per_sec/ {print $2}')
  torch_mem=$(peak_stop)
  [ -z "$torch" ] && torch=- torch_mem=-
  ratio=-
  if [ "$sps" != - ] && [ "$torch" != - ]; then ratio=$(python3 -c "print('%.2f' % ($sps / $torch))"); fi
  printf "%-7s %6d %14s %10s %14s %8s %13s %10s\n" "$model" "$batch" "$sps" "$ms" "$torch" "$ratio" "$mem" "$torch_mem"
done
echo "# ratio = mirrored / torch samples/s; both copy each host batch to the GPU and read the loss back every step"
echo "# *_MiB: peak GPU memory in use while each ran (nvidia-smi every 50 ms, less the level before; CUDA context included)"
exit $failed
