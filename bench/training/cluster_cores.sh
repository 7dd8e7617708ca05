#!/usr/bin/env bash
# Two `mirrored-launch cluster` tasks listed at one host (loopback), side by
# side: each computing with every core (OMP_NUM_THREADS = the cores, what
# they did before the launcher shared the cores out) against the default
# share (cores / tasks at the host). Prints a table of the chief's samples/s
# over the last logging window.
#
#   bench/training/cluster_cores.sh BUILD_DIR [--model cnn] [--steps 300] [--repeats 2]
set -euo pipefail
build=${1:?usage: cluster_cores.sh BUILD_DIR [--model M] [--steps N] [--repeats R]}
shift
model=cnn steps=300 repeats=2
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "cluster_cores.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bin=$build/bin
work=$(mktemp -d /tmp/mirrored-cluster-cores.XXXXXX)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
port=$((20000 + RANDOM % 20000))

# run OMP_VALUE PORT (OMP_VALUE empty: the launcher's share) -> the chief's
# last samples/s; a failed run prints its logs and stops the script
run() {
  local omp=$1 port=$2 i
  local cluster='{"worker":["127.0.0.1:'$port'","127.0.0.1:'$((port + 1))'"]}'
  local pids=()
  rm -rf "$work"/r*
  for i in 0 1; do
    (
      unset OMP_NUM_THREADS
      [ -n "$omp" ] && export OMP_NUM_THREADS=$omp
      export MIRRORED_JOB_TOKEN=bench
      TF_CONFIG='{"cluster":'$cluster',"task":{"type":"worker","index":'$i'}}' exec "$bin/mirrored-launch" cluster \
        --run-dir "$work/r$i" -- --model "$model" --max-steps "$steps" --log-every 50 --no-validate >"$work/l$i" 2>&1
    ) &
    pids+=($!)
  done
  local failed=0
  for i in 0 1; do wait "${pids[$i]}" || failed=1; done
  if [ "$failed" = 1 ] || ! grep -q "step $steps/$steps" "$work/l0"; then
    echo "cluster_cores.sh: a run failed (OMP_NUM_THREADS '${omp:-share}'); its logs:" >&2
    tail -n 20 "$work/l0" "$work/l1" >&2
    exit 1
  fi
  grep -o "step $steps/$steps.*samples/s [0-9]*" "$work/l0" | grep -o '[0-9]*$'
}

echo "# 2 cluster tasks at one host, $model, $steps steps, 1 CPU replica each; $cores cores; $(date -u +%F)"
printf '# %-8s %18s %18s %8s\n' repeat every-core/s share/s ratio
for r in $(seq "$repeats"); do
  a=$(run "$cores" $((port + 4 * r)))
  b=$(run "" $((port + 4 * r + 2)))
  printf '  %-8s %18s %18s %8.2f\n' "$r" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
