#!/usr/bin/env bash
# Worker processes on one host: the shared-memory process group against
# Gloo's TCP loopback (MIRRORED_HOST_TRANSPORT=gloo), beside the same
# replicas as threads of one worker. Runs interleaved, median of --repeats;
# samples/s after the first --log-every window (warm-up), from metrics.jsonl.
# --dtypes "fp32 bf16": a row per model and --allreduce-dtype, all of them
# interleaved within each repeat.
#
#   bench/training/host_transport.sh BUILD_DIR [--steps 300] [--models "mlp cnn"] [--workers 2] [--repeats 3]
#                                    [--dtypes fp32]
set -euo pipefail
build=${1:?usage: host_transport.sh BUILD_DIR [--steps N] [--models "..."] [--workers N] [--repeats R]}
shift
steps=300 models="mlp cnn" workers=2 repeats=3 batch=64 dtypes=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    *) echo "host_transport.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bin=$(cd "$build/bin" && pwd)
cores=$(nproc)
warm=$((steps / 5))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sps() {  # mean samples/s of the windows after the first
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = rows[1:] or rows
print("%.0f" % (sum(r["samples_per_sec"] for r in rows) / len(rows)))
PY
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "# worker processes on one host: shared memory vs Gloo; samples/s, median of $repeats interleaved runs"
echo "# $(date -u '+%F %H:%M') $(uname -m), $cores cores, load $(cut -d' ' -f1-3 /proc/loadavg); per-replica batch $batch;" \
  "$steps steps (first $warm warm-up); $workers replicas, OMP_NUM_THREADS = cores / replicas; --allreduce-dtype: $dtypes"
printf "%-6s %5s %14s %14s %14s %10s %10s\n" model dtype threads procs/shm procs/gloo shm/gloo shm/thr
declare -A thr shm gloo  # "model dtype" -> samples/s of each repeat
for model in $models; do
  threads=$((cores / workers)); [ "$threads" -lt 1 ] && threads=1
  export OMP_NUM_THREADS=$threads
  for ((r = 0; r < repeats; r++)); do
    for dtype in $dtypes; do
      common=(--model "$model" --max-steps "$steps" --log-every "$warm" --batch-per-replica "$batch" --no-validate
              --allreduce-dtype "$dtype")
      rm -rf "${tmp:?}"/*
      "$bin/mirrored-worker" "${common[@]}" --cpu-replicas "$workers" --run-dir "$tmp/t" > "$tmp/t.out" 2>&1
      thr[$model $dtype]+=" $(sps "$tmp/t/metrics.jsonl")"
      MIRRORED_HOST_TRANSPORT=shm "$bin/mirrored-launch" local --workers "$workers" --cpu-replicas 1 --run-dir "$tmp/s" \
        -- "${common[@]}" > "$tmp/s.out" 2>&1
      shm[$model $dtype]+=" $(sps "$tmp/s/metrics.jsonl")"
      MIRRORED_HOST_TRANSPORT=gloo "$bin/mirrored-launch" local --workers "$workers" --cpu-replicas 1 --run-dir "$tmp/g" \
        -- "${common[@]}" > "$tmp/g.out" 2>&1
      gloo[$model $dtype]+=" $(sps "$tmp/g/metrics.jsonl")"
    done
  done
  for dtype in $dtypes; do
    # shellcheck disable=SC2086  # the lists split into their values
    t=$(median ${thr[$model $dtype]}) s=$(median ${shm[$model $dtype]}) g=$(median ${gloo[$model $dtype]})
    printf "%-6s %5s %14s %14s %14s %10.2f %10.2f\n" "$model" "$dtype" "$t" "$s" "$g" "$(echo "$s / $g" | bc -l)" \
      "$(echo "$s / $t" | bc -l)"
  done
done
