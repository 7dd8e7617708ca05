#!/usr/bin/env bash
# On a machine with a GPU: the gpu-labelled tests, then one-GPU training
# throughput of mirrored-worker (--device gpu) against PyTorch on the same GPU
# (when python3 has torch), per model and precision, with each one's peak GPU
# memory, printed as a table.
#
#   bench/training/gpu_train.sh BUILD_DIR [--steps 300] [--batch 256] [--models "mlp cnn resnet"]
#                               [--precisions "fp32 bf16"] [--repeat N] [--no-tests | --no-table]
#   OUTDIR/run bench/training/gpu_train.sh OUTDIR     # a pack from bench/gpu/pack.sh (no Debian packages there)
#   MIRRORED_GPU_LOG_DIR=$OUT ... --no-tests            # keep the logs; tests and table as two calls
#
# BUILD_DIR is a build tree or a pack: its bin/ holds mirrored-worker and the
# test binaries (train_gpu_test, nccl_communicator_test, model_gpu_test).
# Data: --data DIR, else MIRRORED_DATA_DIR (the pack's run wrapper sets it),
# else the Debian Fashion-MNIST location. samples/s is the mean of the
# --log-every windows after the first (warm-up: cuDNN algorithm search,
# allocations).
# --precisions (default fp32): each is passed as --precision to mirrored-worker
# and to torch_gpu_train.py (fp32 tf32 bf16 fp16); a precision the worker
# refuses (exit 2) is a failed row, its last lines on stderr, and the table
# goes on. --repeat N runs each model and precision N times in a row.
# Each program run is bounded by MIRRORED_GPU_RUN_TIMEOUT (120 s), each test
# binary by MIRRORED_GPU_TEST_TIMEOUT (150 s).
# Exit status: 1 when a test failed or a mirrored-worker run did not finish.
set -uo pipefail
usage='usage: gpu_train.sh BUILD_DIR [--steps N] [--batch B] [--models "..."] [--precisions "..."] [--repeat N] [--data DIR] [--no-tests | --no-table]'
build=${1:?$usage}
shift
steps=300 batch=256 models="mlp cnn resnet" precisions=fp32 repeat=1 tests=1 table=1
data=${MIRRORED_DATA_DIR:-/usr/share/datasets/fashion-mnist}
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --no-tests) tests=0; shift ;;
    --no-table) table=0; shift ;;
    *) echo "gpu_train.sh: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
for n in "$steps" "$batch" "$repeat"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "gpu_train.sh: $n is not a positive number ($usage)" >&2; exit 2; }
done
run_timeout=${MIRRORED_GPU_RUN_TIMEOUT:-120}
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

[ "$table" = 1 ] || exit $failed

# samples/s and ms/step of the windows after the first, from metrics.jsonl;
# nothing (and exit 1) when it has no training window.
window_stats() {
  python3 - "$1" <<'PY' 2>/dev/null
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

# One mirrored-worker run: sets sps, ms and mem ("rc=N" in sps when it
# failed: 2 is a flag or value it refuses, 124 or 137 the run timeout).
run_mirrored() {  # TAG MODEL PRECISION
  local tag=$1 model=$2 precision=$3 rc stats
  peak_start
  # --epochs high enough that --max-steps decides (an epoch is 234 steps at 256).
  # --foreground keeps the run in this script's process group: a timeout
  # around the whole script (bench/gpu/device_check.sh) then ends it too.
  timeout --foreground -k 10 "$run_timeout" "$bin/mirrored-worker" --device gpu --model "$model" --precision "$precision" \
    --batch-per-replica "$batch" --max-steps "$steps" --epochs 1000 --log-every "$warm" --no-validate \
    --data "$data" --run-dir "$runs/$tag" > "$tmp/$tag.log" 2>&1
  rc=$?
  mem=$(peak_stop)
  if [ "$rc" = 0 ] && stats=$(window_stats "$runs/$tag/metrics.jsonl"); then
    read -r sps ms <<< "$stats"
    return
  fi
  [ "$rc" = 0 ] && rc="0, no metrics"
  echo "---- mirrored-worker --model $model --precision $precision --batch-per-replica $batch: exit $rc" \
       "($tmp/$tag.log, last lines):" >&2
  tail -20 "$tmp/$tag.log" >&2
  sps="rc=${rc%%,*}" ms=- failed=1
}

# One PyTorch run, with the machine's own libraries, not the pack's (run
# saves them): sets torch and torch_mem, "-" when it did not finish (its
# last lines on stderr unless python3 has no torch at all).
run_torch() {  # TAG MODEL PRECISION
  local tag=$1 model=$2 precision=$3 log="$tmp/torch-$1.log"
  peak_start
  LD_LIBRARY_PATH="${MIRRORED_ORIG_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" timeout --foreground -k 10 "$run_timeout" \
    python3 "$here/torch_gpu_train.py" --model "$model" --batch "$batch" --steps "$steps" --warmup "$warm" \
    --precision "$precision" --data "$data" > "$log" 2>&1
  torch_mem=$(peak_stop)
  torch=$(awk '/^samples_per_sec / {print $2}' "$log" | tail -1)
  [ -n "$torch" ] && return
  torch=- torch_mem=-
  grep -q "No module named 'torch'" "$log" && return
  echo "---- torch_gpu_train.py --model $model --precision $precision --batch $batch did not finish ($log, last lines):" >&2
  tail -8 "$log" >&2
}

echo
echo "# one-GPU training throughput: batch $batch, Adam; $steps steps, the first $warm warm-up"
printf "%-7s %6s %-9s %14s %10s %14s %8s %13s %10s\n" \
  model batch precision mirrored/s ms/step torch/s ratio mirrored_MiB torch_MiB
for model in $models; do
  for precision in $precisions; do
    for ((r = 1; r <= repeat; r++)); do
      tag="$model-$precision-b$batch"
      [ "$repeat" -gt 1 ] && tag="$tag-r$r"
      run_mirrored "$tag" "$model" "$precision"
      run_torch "$tag" "$model" "$precision"
      ratio=-
      if [[ $sps != rc=* ]] && [ "$torch" != - ]; then ratio=$(awk -v m="$sps" -v t="$torch" 'BEGIN {printf "%.2f", m / t}'); fi
      printf "%-7s %6d %-9s %14s %10s %14s %8s %13s %10s\n" \
        "$model" "$batch" "$precision" "$sps" "$ms" "$torch" "$ratio" "$mem" "$torch_mem"
    done
  done
done
echo "# ratio = mirrored / torch samples/s; both copy each host batch to the GPU and read the loss back every step"
echo "# precision: fp32 = FP32 products, no TF32 in either; tf32 = TF32 tensor cores; bf16/fp16 = 16-bit products,"
echo "#   FP32 weights and Adam state (torch: autocast; fp16 with GradScaler, mirrored with its dynamic loss scale)"
echo "# mirrored/s rc=N: mirrored-worker exited N (2: it refused a flag or value; 124 or 137: over ${run_timeout} s); see stderr"
echo "# *_MiB: peak GPU memory in use while each ran (nvidia-smi every 50 ms, less the level before; CUDA context included)"
exit $failed
