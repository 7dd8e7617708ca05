# shellcheck shell=bash disable=SC2154  # WORK, NODE, CPUS, ... come from slurm_cluster_test.sh
# The sbatch mode of slurm_cluster_test.sh, sourced by it once its Slurm is
# up: three jobs of the real deploy/slurm/train.sbatch, submitted with
# sbatch. Uses the script's variables (WORK, NODE, CPUS, LAUNCH,
# WORKER_PORT_BASE, SBATCH_SCRIPT) and helpers (fail, log, owner_of).
#
#   source slurm_sbatch_jobs.sh && run_sbatch_mode

readonly JOB_STEPS=600  # jobs 1 and 2: the requeued one is stopped mid-training
# Bounded waits (seconds).
readonly JOB_DEADLINE=90          # a submitted job, from sbatch to its final state
readonly TRAINING_DEADLINE=45     # the job to be requeued, until it has trained 50 steps
readonly REQUEUE_DEADLINE=120     # the requeued job, from `scontrol requeue` to its final state
readonly TIME_LIMIT_DEADLINE=150  # the job with a 3-minute limit, from sbatch to its end by the signal

# --- deploy/slurm/train.sbatch as written --------------------------------------
# Overridden on sbatch's command line, for one node with $CPUS CPUs and a
# partition limit of 10 minutes: --nodes, --cpus-per-task, --time, --output
# (into the work directory). In the environment, which sbatch passes on:
# the launcher, the shared directory, the secret file and the port base.
# Everything else is the script's own: its job name, one task per node, the
# gpu GRES, --requeue, --signal, --open-mode.
JOB_NAME=$(sed -n 's/^#SBATCH --job-name=//p' "$SBATCH_SCRIPT")

# submit_train [SBATCH_OPTION...] -- [WORKER_ARG...]: submits the script for
# one node with small worker arguments (mlp, 2 CPU replicas); prints the job
# id.
submit_train() {
  local options=()
  while (($# > 0)) && [[ $1 != -- ]]; do
    options+=("$1")
    shift
  done
  shift
  timeout 10 sbatch --parsable --nodes=1 --cpus-per-task="$CPUS" --output="$WORK/%x-%j.job.out" "${options[@]}" \
    "$SBATCH_SCRIPT" --model mlp --batch-per-replica 16 --cpu-replicas 2 --log-every 50 --no-validate \
    --heartbeat-interval 0.2 --registration-timeout 60 "$@" | cut -d';' -f1
}

# job_field ID FIELD: the field's value in `scontrol show job -o ID`.
job_field() {
  timeout 5 scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# expect_completed ID SECONDS: waits until the job is in a final state (a
# requeued job goes back to PENDING instead), which must be COMPLETED with
# exit code 0; fails past SECONDS.
expect_completed() {
  local deadline=$((SECONDS + $2)) state exit_code
  while :; do
    state=$(job_field "$1" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;;
    esac
    ((SECONDS < deadline)) || fail "job $1 did not finish within $2 s (state ${state:-unknown}, reason $(job_field "$1" Reason))"
    sleep 0.2
  done
  exit_code=$(job_field "$1" ExitCode)
  [[ $state == COMPLETED && $exit_code == 0:0 ]] ||
    fail "job $1 ended $state with exit code $exit_code (reason $(job_field "$1" Reason)), expected COMPLETED 0:0"
}

# expect_final_checkpoint RUN_DIR STEP: the checkpoint index names ckpt-STEP
# and that checkpoint holds the model.
expect_final_checkpoint() {
  grep -q "\"latest\": *\"ckpt-$2\"" "$1/checkpoints/checkpoint" 2>/dev/null ||
    fail "$1/checkpoints/checkpoint does not name ckpt-$2 as the latest: $(cat "$1/checkpoints/checkpoint" 2>&1)"
  [[ -s $1/checkpoints/ckpt-$2/model.safetensors ]] || fail "$1/checkpoints/ckpt-$2/model.safetensors is missing"
}

# cpu_count LIST: the number of CPUs in a list such as 0-3,8,10-11.
cpu_count() {
  local n=0 r
  local IFS=,
  for r in $1; do
    if [[ $r == *-* ]]; then n=$((n + ${r#*-} - ${r%-*} + 1)); else n=$((n + 1)); fi
  done
  echo "$n"
}

# fingerprint LINE: the weights fingerprint of a `done:` line.
fingerprint() { sed -n 's/.*weights fingerprint \([0-9a-f]*\).*/\1/p' <<<"$1"; }

# 1. A job as a user submits it: COMPLETED, the launcher's task lines and the
#    chief's `done:` line in the job's output, a final checkpoint in the run
#    directory named after the job, the gpu GRES allocated, the secret file
#    private. Sets UNINTERRUPTED_FINGERPRINT.
run_completed_job() {
  local id out run_dir tres line
  id=$(submit_train --time=5 -- --max-steps "$JOB_STEPS" --heartbeat-timeout 1)
  [[ $id =~ ^[0-9]+$ ]] || fail "sbatch $SBATCH_SCRIPT did not print a job id ('$id')"
  out="$WORK/$JOB_NAME-$id.job.out"
  run_dir="$MIRRORED_SHARED/mirrored-runs/$JOB_NAME-$id"
  expect_completed "$id" "$JOB_DEADLINE"
  tres=$(job_field "$id" TresPerNode)
  [[ $tres == *gpu:1* ]] || fail "job $id was not given the script's --gres=gpu:1 (TresPerNode '$tres')"
  grep -q "^mirrored: job $id on 1 nodes ($NODE), run directory $run_dir\$" "$out" ||
    fail "$out lacks the script's 'mirrored: job $id on 1 nodes ($NODE), run directory $run_dir' line"
  grep -q "^\[worker:0\] .*coordination service listening on .*:$WORKER_PORT_BASE\$" "$out" ||
    fail "$out lacks the launcher's worker:0 line of the coordination service on port $WORKER_PORT_BASE"
  grep -q "^\[worker:0\] .*training mlp on 2 replicas in sync" "$out" ||
    fail "$out lacks the chief's 'training mlp on 2 replicas in sync' line (--cpu-replicas 2 on one node)"
  line=$(grep -m1 "^\[worker:0\] done: $JOB_STEPS steps;" "$out") ||
    fail "$out lacks the chief's 'done: $JOB_STEPS steps' line"
  UNINTERRUPTED_FINGERPRINT=$(fingerprint "$line")
  [[ -n $UNINTERRUPTED_FINGERPRINT ]] || fail "the chief printed no weights fingerprint: $line"
  expect_final_checkpoint "$run_dir" "$JOB_STEPS"
  [[ $(stat -c %a "$MIRRORED_SECRET_FILE" 2>/dev/null) == 600 ]] || fail "$MIRRORED_SECRET_FILE is missing or not mode 600"
  log "job $id: COMPLETED 0:0 with $tres; $line; $run_dir/checkpoints/ckpt-$JOB_STEPS"
}

# 2. Preemption: the same job with --gres=none (a CPU node's way to run the
#    script), requeued once it has trained 50 steps. Slurm stops it with
#    SIGTERM: the chief must checkpoint the step the workers agree to stop
#    at (there is no other checkpoint before step 1875, the epoch's end) and
#    the launcher exit 143. The job must come back with the same id and run
#    directory (the output keeps the first run's lines: --open-mode=append),
#    resume from exactly that step and complete with the same weights as the
#    uninterrupted job 1.
#    Its worker is stopped (SIGSTOP) before the requeue, so that the requeue
#    finds it mid-training however fast this machine trains, and so that its
#    CPUs can be read; Slurm sends a job it ends SIGCONT and SIGTERM, as for
#    tasks held by a debugger (heartbeat timeout 10 s for the pause). Not
#    `scontrol suspend`: Slurm ends a suspended job with SIGKILL.
run_requeued_job() {
  local id state out run_dir tres deadline polls d comm pid workers=() allowed n last_line preempted_at resumed_at line fp
  id=$(submit_train --time=5 --gres=none -- --max-steps "$JOB_STEPS" --heartbeat-timeout 10)
  [[ $id =~ ^[0-9]+$ ]] || fail "sbatch --gres=none $SBATCH_SCRIPT did not print a job id ('$id')"
  out="$WORK/$JOB_NAME-$id.job.out"
  run_dir="$MIRRORED_SHARED/mirrored-runs/$JOB_NAME-$id"
  tres=$(job_field "$id" TresPerNode)
  [[ $tres != *gpu* ]] || fail "sbatch --gres=none left job $id with the script's GRES (TresPerNode '$tres')"
  deadline=$((SECONDS + TRAINING_DEADLINE))
  polls=0
  until grep -q "^\[worker:0\] step 50/$JOB_STEPS " "$out" 2>/dev/null; do
    if ((++polls % 10 == 0)); then  # (scontrol is slow next to grep; the pause must follow step 50 closely)
      state=$(job_field "$id" JobState)
      [[ $state == PENDING || $state == RUNNING ]] || fail "job $id ended $state before it trained 50 steps"
      ((SECONDS < deadline)) || fail "job $id did not train 50 steps within ${TRAINING_DEADLINE}s (state $state)"
    fi
    sleep 0.05
  done
  for d in /proc/[0-9]*; do
    read -r comm <"$d/comm" 2>/dev/null && [[ $comm == mirrored-worker && $(owner_of "${d#/proc/}") == "$$" ]] &&
      workers+=("${d#/proc/}")
  done
  ((${#workers[@]} == 1)) || fail "job $id: expected one mirrored-worker process, found ${#workers[@]} (${workers[*]})"
  pid=${workers[0]}
  kill -STOP "$pid" || fail "job $id: cannot stop its worker (pid $pid): did it finish its $JOB_STEPS steps first?"
  # Its step runs on every CPU the job has on the node, not on the one core
  # that srun's default of one CPU per task gets bound to.
  allowed=$(sed -n 's/^Cpus_allowed_list:\s*//p' "/proc/$pid/status")
  n=$(cpu_count "$allowed")
  ((n == CPUS)) ||
    fail "job $id: the worker (pid $pid) may run on CPUs $allowed only, $n of the job's $CPUS (srun without --cpus-per-task?)"
  last_line=$(grep "^\[worker:0\] step [0-9]*/" "$out" | tail -n 1 | cut -d' ' -f2,3)
  log "job $id: worker (pid $pid) paused, last progress line '$last_line'; it runs on CPUs $allowed, all $CPUS of the job"
  timeout 10 scontrol requeue "$id" || fail "scontrol requeue $id failed"
  expect_completed "$id" "$REQUEUE_DEADLINE"
  [[ $(job_field "$id" Restarts) == 1 ]] || fail "job $id: Restarts=$(job_field "$id" Restarts), expected 1 (was it requeued?)"
  preempted_at=$(sed -n 's/^\[worker:0\] preempted (SIGTERM [^)]*): stopped after step \([0-9]*\);.*/\1/p' "$out" | head -n 1)
  [[ -n $preempted_at ]] || fail "$out lacks the chief's 'preempted (SIGTERM ...): stopped after step <step>' line of the SIGTERM"
  grep -q "^\[mirrored-launch\] job stopped by SIGTERM" "$out" || fail "$out lacks the launcher's 'job stopped by SIGTERM' line"
  grep -q "task 0: Exited with exit code 143" "$out" || fail "$out lacks srun's 'task 0: Exited with exit code 143' line"
  resumed_at=$(sed -n "s|^\[worker:0\] .*resuming from $run_dir/checkpoints/ckpt-\([0-9]*\) .*|\1|p" "$out" | head -n 1)
  [[ -n $resumed_at ]] || fail "$out lacks the chief's 'resuming from $run_dir/checkpoints/ckpt-<step>' line"
  ((resumed_at == preempted_at && resumed_at >= 50 && resumed_at < JOB_STEPS)) ||
    fail "job $id stopped after step $preempted_at but resumed from step $resumed_at"
  line=$(grep -m1 "^\[worker:0\] done: $JOB_STEPS steps;" "$out") ||
    fail "$out lacks the chief's 'done: $JOB_STEPS steps' line after the requeue"
  fp=$(fingerprint "$line")
  [[ $fp == "$UNINTERRUPTED_FINGERPRINT" ]] ||
    fail "job $id ended with weights fingerprint '$fp' after its requeue, job 1 with $UNINTERRUPTED_FINGERPRINT uninterrupted"
  expect_final_checkpoint "$run_dir" "$JOB_STEPS"
  log "job $id: SIGTERM checkpoint at step $preempted_at, exit 143, requeued, resumed from ckpt-$resumed_at; $line"
}

# 3. The time limit: a job of 100 epochs with the script's own
#    --signal=TERM@120 and a limit of 3 minutes. Slurm checks limits every
#    30 s and signals up to 30 s early, so the signal comes 30 to 60 s after
#    the start: the worker is training by then (a signal sent before srun
#    has started the step would be lost; 2 minutes would risk that). Slurm
#    sends SIGTERM to the job's steps; the chief must checkpoint the step the
#    workers stop at, and the job end with exit code 143 before its limit,
#    not TIMEOUT. Slurm does not requeue it.
run_time_limited_job() {
  local id state exit_code out run_dir preempted_at deadline
  id=$(submit_train --time=3 -- --epochs 100 --heartbeat-timeout 1)
  [[ $id =~ ^[0-9]+$ ]] || fail "sbatch --time=3 $SBATCH_SCRIPT did not print a job id ('$id')"
  out="$WORK/$JOB_NAME-$id.job.out"
  run_dir="$MIRRORED_SHARED/mirrored-runs/$JOB_NAME-$id"
  deadline=$((SECONDS + TIME_LIMIT_DEADLINE))
  while :; do
    state=$(job_field "$id" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;;
    esac
    ((SECONDS < deadline)) ||
      fail "job $id did not end within ${TIME_LIMIT_DEADLINE}s (state $state): did --signal=TERM@120 reach the workers?"
    sleep 0.5
  done
  exit_code=$(job_field "$id" ExitCode)
  [[ $state == FAILED && $exit_code == 143:0 ]] ||
    fail "job $id ended $state with exit code $exit_code, expected FAILED 143:0 (the workers stopped by --signal=TERM@120)"
  [[ $(job_field "$id" Restarts) == 0 ]] || fail "job $id: Restarts=$(job_field "$id" Restarts), expected 0"
  preempted_at=$(sed -n 's/^\[worker:0\] preempted (SIGTERM [^)]*): stopped after step \([0-9]*\);.*/\1/p' "$out" | head -n 1)
  [[ -n $preempted_at ]] || fail "$out lacks the chief's 'preempted (SIGTERM ...): stopped after step <step>' line of the SIGTERM"
  expect_final_checkpoint "$run_dir" "$preempted_at"
  log "job $id: --signal=TERM@120 under a 3-minute limit: stopped after step $preempted_at with its checkpoint, $state $exit_code"
}

run_sbatch_mode() {
  export MIRRORED_LAUNCH=$LAUNCH
  export MIRRORED_SHARED="$WORK/shared"
  export MIRRORED_SECRET_FILE="$WORK/secret/job-secret"
  export MIRRORED_PORT_BASE=$WORKER_PORT_BASE
  run_completed_job
  run_requeued_job
  run_time_limited_job
  log "PASS: $SBATCH_SCRIPT ran to COMPLETED on node $NODE; requeued, it resumed from its SIGTERM checkpoint" \
    "to the same weights; its time-limit signal stopped it with a checkpoint"
}
