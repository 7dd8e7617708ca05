#!/usr/bin/env bash
# Checks deploy/slurm/train.sbatch: `bash -n`, shellcheck when installed, then
# runs it as sbatch would on a 2-node allocation, with a stand-in `srun` that
# starts the step's tasks one after the other with srun's variables, and
# mirrored-launch in --dry-run mode with a stand-in worker. Checks each task's
# TF_CONFIG, the shared run directory, the job token and the secret file.
#
#   tests/deploy/sbatch_test.sh build/bin/mirrored-launch
set -euo pipefail
launcher=$(readlink -f "${1:?usage: sbatch_test.sh MIRRORED_LAUNCH}")
script=$(readlink -f "$(dirname "$0")/../../deploy/slurm/train.sbatch")
fail() { echo "FAIL: $*" >&2; exit 1; }

bash -n "$script" || fail "bash -n $script"
if command -v shellcheck >/dev/null; then
  shellcheck "$script" || fail "shellcheck $script"
else
  echo "note: shellcheck not installed, skipped"
fi
grep -q '^#SBATCH --ntasks-per-node=1$' "$script" || fail "not one task per node"
grep -q '^#SBATCH --requeue$' "$script" || fail "no --requeue"
grep -q '^#SBATCH --gres=gpu:' "$script" || fail "no GPUs per node"
grep -q '^#SBATCH --signal=' "$script" || fail "no --signal before the time limit"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/home" "$tmp/shared"
printf '#!/bin/sh\nexit 0\n' > "$tmp/worker"
chmod +x "$tmp/worker"
# Stand-in srun: drops its own options, runs the step's 2 tasks (one per node).
cat > "$tmp/bin/srun" <<'SRUN'
#!/usr/bin/env bash
set -euo pipefail
while [ "${1:-}" != "" ] && [ "${1#--}" != "$1" ]; do shift; done
prog=$1 sub=$2; shift 2
echo "$prog $sub $*" > "$SRUN_LOG.cmd"
for i in 0 1; do
  SLURM_PROCID=$i SLURM_LOCALID=0 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_NODELIST='node[01-02]' \
    SLURM_STEP_TASKS_PER_NODE='1(x2)' \
    "$prog" "$sub" --dry-run --worker-binary "$FAKE_WORKER" "$@" > "$SRUN_LOG.$i"
  echo "$MIRRORED_JOB_TOKEN" > "$SRUN_LOG.token.$i"
done
SRUN
chmod +x "$tmp/bin/srun"

env -i PATH="$tmp/bin:/usr/bin:/bin" HOME="$tmp/home" MIRRORED_SHARED="$tmp/shared" \
  MIRRORED_LAUNCH="$launcher" FAKE_WORKER="$tmp/worker" SRUN_LOG="$tmp/srun" \
  SLURM_JOB_ID=4242 SLURM_JOB_NAME=mirrored-fmnist SLURM_JOB_NUM_NODES=2 SLURM_JOB_NODELIST='node[01-02]' \
  bash "$script" --model mlp --max-steps 5 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the script failed"; }

run_dir="$tmp/shared/mirrored-runs/mirrored-fmnist-4242"
[ -d "$run_dir" ] || fail "run directory $run_dir not created"
grep -q -- "cluster --from-slurm --slurm-port-base 14242 --run-dir $run_dir --max-restarts 3 -- --model mlp --max-steps 5" \
  "$tmp/srun.cmd" || fail "srun command: $(cat "$tmp/srun.cmd")"
for i in 0 1; do
  out=$(tr -d ' ' < "$tmp/srun.$i")
  grep -q '"cluster":{"worker":\["node01:14242","node02:14242"\]}' <<<"$out" || fail "task $i TF_CONFIG: $out"
  grep -q "\"task\":{\"index\":$i,\"type\":\"worker\"}" <<<"$out" || fail "task $i is not worker:$i: $out"
  grep -q -- "--modelmlp--max-steps5--run-dir$run_dir" <<<"$out" || fail "task $i worker args: $out"
done
token=$(cat "$tmp/srun.token.0")
[ "$token" = "$(cat "$tmp/srun.token.1")" ] || fail "tasks got different tokens"
grep -Eq '^[0-9a-f]{64}$' <<<"$token" || fail "token '$token' is not 64 hex digits"
[ "$(stat -c %a "$tmp/home/.mirrored/job-secret")" = 600 ] || fail "secret file is not mode 600"
echo "ok: train.sbatch (bash -n, shellcheck, 2-node dry run)"
