#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2086  # functions run from traps; pid lists split on purpose
# Real Slurm tests of the Slurm path: a throwaway one-node Slurm (munged,
# slurmctld, slurmd) configured on localhost under a temporary directory, then
#   srun    srun -n 2 mirrored-launch cluster --from-slurm -- --model mlp ...
#           must train to completion with both tasks exiting 0 and printing
#           the same weights fingerprint; then the same step with a user's
#           program after `--` (tests/launcher/user_program.py), which must
#           get its TF_CONFIG and ranks from Slurm and meet the other task.
#   sbatch  the real deploy/slurm/train.sbatch, submitted with sbatch and
#           only what one node without GPUs needs overridden on its command
#           line and in its environment (slurm_sbatch_jobs.sh):
#           a job that must end COMPLETED with a final checkpoint; a job
#           requeued mid-training (`scontrol requeue`, what preemption with
#           PreemptMode=REQUEUE does) that must come back under the same job
#           id, resume from the checkpoint its first run wrote on SIGTERM and
#           end with the first job's weights; a job under a 3-minute limit
#           that the script's --signal=TERM@120 must stop with a checkpoint.
#
#   slurm_cluster_test.sh BIN_DIR [srun|sbatch]   # MIRRORED_SLURM_NO_INSTALL=1: never call apt-get
#
# Exit status: 0 pass, 1 fail, 77 skipped (not root, packages missing and
# not installable, or the daemons cannot run here; the reason is printed).
# The daemons run in the foreground (-D) as this script's children with their
# own state, spool, pid and log files; every process this script started
# (they carry MIRRORED_SLURM_TEST_TAG in their environment, or hold a file of
# its work directory open: slurmstepd and the job's tasks included) is
# stopped on exit, whatever happened; a later run reaps what a killed run left.
set -u -o pipefail

BIN_DIR=${1:?usage: slurm_cluster_test.sh BIN_DIR [srun|sbatch]}
MODE=${2:-srun}
LAUNCH="$BIN_DIR/mirrored-launch"
WORKER="$BIN_DIR/mirrored-worker"
TEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # (absolute: the script later works in its work directory)
SBATCH_SCRIPT="$(cd "$TEST_DIR/../.." && pwd)/deploy/slurm/train.sbatch"
readonly STEPS=200  # the srun mode (the sbatch mode's own figures are in slurm_sbatch_jobs.sh)
# Bounded waits (seconds).
readonly MUNGE_DEADLINE=10
readonly NODE_IDLE_DEADLINE=30
readonly SRUN_DEADLINE=80
readonly STOP_DEADLINE=10

TAG="mirrored-slurm-test-$$-$RANDOM"
WORK=""
KEEP_WORK=${MULTIHOST_KEEP_WORK:-0}  # 1: keep the work directory (logs) even on success
DAEMON_PIDS=()

log() { echo "slurm_cluster_test: $*"; }
dump_logs() {
  local f
  [[ -n $WORK ]] || return 0
  for f in "$WORK"/srun.out "$WORK"/*.job.out "$WORK"/munged.log "$WORK"/slurmctld.log "$WORK"/slurmd.log; do
    [[ -f $f ]] || continue
    echo "----- last lines of $f"
    tail -n 20 "$f"
  done
}
skip() {
  echo "SKIPPED: slurm_cluster_test: $*"
  dump_logs
  exit 77
}
fail() {
  echo "FAIL: slurm_cluster_test: $*"
  KEEP_WORK=1
  dump_logs
  exit 1
}

# The pid of the test run that started process $1, or nothing: the run's tag
# in its environment (the daemons, srun and the job's tasks), else an open
# file in a run's work directory (slurmstepd overwrites its environment for
# its process title but keeps slurmd.log open).
owner_of() {
  local d=/proc/$1 tag f
  tag=$({ tr "\0" "\n" <"$d/environ"; } 2>/dev/null | sed -n 's/^MIRRORED_SLURM_TEST_TAG=//p')
  if [[ $tag =~ ^mirrored-slurm-test-([0-9]+)- ]]; then
    echo "${BASH_REMATCH[1]}"
    return
  fi
  for f in "$d"/fd/*; do
    [[ $(readlink "$f" 2>/dev/null) =~ /mirrored-slurm\.([0-9]+)\.[A-Za-z0-9]+/ ]] && echo "${BASH_REMATCH[1]}" && return
  done 2>/dev/null
}

# Pids of every process of the run whose pid is $1.
pids_of_run() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    ((pid == $$ || pid == BASHPID)) && continue
    [[ $(owner_of "$pid") == "$1" ]] && echo "$pid"
  done
}

# Daemons, tasks and work directories of earlier runs killed before their
# teardown (a CTest timeout sends SIGKILL): their owner pid is gone.
reap_stale_runs() {
  local d pid owner dir
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    ((pid == $$ || pid == BASHPID)) && continue
    owner=$(owner_of "$pid")
    [[ -n $owner ]] || continue
    ((owner != $$)) && kill -0 "$owner" 2>/dev/null && continue
    kill -KILL "$pid" 2>/dev/null && log "stopped pid $pid left by an earlier run (pid $owner, gone)"
  done
  for dir in "${TMPDIR:-/tmp}"/mirrored-slurm.[0-9]*.*; do
    [[ -d $dir && $dir =~ /mirrored-slurm\.([0-9]+)\.[A-Za-z0-9]+$ ]] || continue
    owner=${BASH_REMATCH[1]}
    ((owner != $$)) && kill -0 "$owner" 2>/dev/null && continue
    rm -rf "$dir" && log "removed $dir left by an earlier run (pid $owner, gone)"
  done
}

# stop_pids SIGNAL PID...: signal, then wait (bounded) until they are gone.
stop_pids() {
  local sig=$1 deadline=$((SECONDS + STOP_DEADLINE)) p alive
  shift
  (($# == 0)) && return 0
  kill "-$sig" "$@" 2>/dev/null
  while :; do
    alive=()
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
    ((${#alive[@]} == 0)) && return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

teardown() {
  local rc=$? left
  trap - EXIT INT TERM
  if [[ -n $WORK && -f $WORK/slurm.conf ]]; then
    # Cancel whatever is still queued or running before the daemons go.
    SLURM_CONF="$WORK/slurm.conf" timeout 5 scancel --quiet --full -u root >/dev/null 2>&1
  fi
  stop_pids TERM "${DAEMON_PIDS[@]}" || stop_pids KILL "${DAEMON_PIDS[@]}"
  mapfile -t left < <(pids_of_run $$)
  if ((${#left[@]} > 0)); then
    echo "slurm_cluster_test: stopping leftover processes of this run: ${left[*]}"
    stop_pids KILL "${left[@]}"
  fi
  wait 2>/dev/null
  if [[ -n $WORK ]]; then
    if ((KEEP_WORK)); then echo "slurm_cluster_test: kept $WORK for inspection"; else rm -rf "$WORK"; fi
  fi
  exit "$rc"
}
trap teardown EXIT
trap 'log "interrupted (SIGINT/SIGTERM): tearing down"; exit 1' INT TERM

# --- preconditions ------------------------------------------------------------
[[ -x $LAUNCH ]] || fail "$LAUNCH is missing or not executable (build the mirrored-launch target)"
[[ -x $WORKER ]] || fail "$WORKER is missing or not executable (build the mirrored-worker target)"
[[ $MODE == srun || $MODE == sbatch ]] || fail "unknown mode '$MODE' (srun or sbatch)"
[[ $MODE == srun || -f $SBATCH_SCRIPT ]] || fail "$SBATCH_SCRIPT is missing"
((EUID == 0)) || skip "needs root to run slurmctld/slurmd/munged (SlurmUser=root); running as uid $EUID"
reap_stale_runs
need_install=0
SLURM_COMMANDS=(munged slurmctld slurmd srun sinfo scancel sbatch scontrol)
for c in "${SLURM_COMMANDS[@]}"; do command -v "$c" >/dev/null || need_install=1; done
if ((need_install)); then
  [[ ${MIRRORED_SLURM_NO_INSTALL:-0} == 1 ]] && skip "Slurm/munge are not installed and MIRRORED_SLURM_NO_INSTALL=1"
  command -v apt-get >/dev/null || skip "Slurm/munge are not installed and there is no apt-get"
  log "installing slurmctld slurmd slurm-client munge with apt-get"
  DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null 2>&1 ||
    skip "apt-get install slurmctld slurmd slurm-client munge failed (no package index or network?)"
  for c in "${SLURM_COMMANDS[@]}"; do
    command -v "$c" >/dev/null || skip "'$c' is still missing after apt-get install"
  done
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-slurm.$$.XXXXXX") || fail "cannot create a temporary directory"
chmod 0755 "$WORK"
mkdir -p "$WORK/munge" "$WORK/ctld" "$WORK/spool" "$WORK/run" || fail "cannot create state directories in $WORK"
chmod 0700 "$WORK/munge"
export MIRRORED_SLURM_TEST_TAG=$TAG
export SLURM_CONF="$WORK/slurm.conf"

# --- munge --------------------------------------------------------------------
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none || fail "cannot write a munge key"
chmod 0400 "$WORK/munge/munge.key"
MUNGE_SOCKET="$WORK/munge/munge.socket"
munged --foreground --force --key-file="$WORK/munge/munge.key" --socket="$MUNGE_SOCKET" \
  --pid-file="$WORK/munge/munged.pid" --log-file="$WORK/munged.log" --seed-file="$WORK/munge/munged.seed" \
  >>"$WORK/munged.log" 2>&1 &
DAEMON_PIDS+=($!)
deadline=$((SECONDS + MUNGE_DEADLINE))
until munge --socket="$MUNGE_SOCKET" -n 2>/dev/null | unmunge --socket="$MUNGE_SOCKET" >/dev/null 2>&1; do
  kill -0 "${DAEMON_PIDS[0]}" 2>/dev/null || skip "munged exited at start (see munged.log below)"
  ((SECONDS < deadline)) || skip "munged did not answer on $MUNGE_SOCKET within ${MUNGE_DEADLINE}s"
  sleep 0.1
done

# --- slurm.conf: one node, this host ------------------------------------------
# The node is this host's short name when it resolves (the worker then meets
# its peers through a host name, as on a real cluster), else localhost.
NODE=$(hostname -s 2>/dev/null)
if [[ -z $NODE ]] || ! getent hosts "$NODE" >/dev/null; then NODE=localhost; fi
CPUS=$(nproc)
# Two consecutive ports that nothing listens on, from a start derived from
# this run's pid: away from Slurm's defaults (6817/6818) so that a system
# Slurm on the same machine is left alone. (Not reserved: a daemon that then
# fails to bind reports it in its log.)
free_port_pair() {
  local p=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; do
    p=$((p + 2))
  done
  echo "$p"
}
CTLD_PORT=$(free_port_pair $((20000 + ($$ % 5000) * 2)))
SLURMD_PORT=$((CTLD_PORT + 1))
WORKER_PORT_BASE=$(free_port_pair $((32000 + ($$ % 5000) * 2)))
# The sbatch mode's node looks to train.sbatch like a GPU node of a real
# cluster:
# - it offers one `gpu` GRES, so the script's `#SBATCH --gres=gpu:1` is
#   allocated as written. gres.conf names a stand-in device file (a
#   character device with /dev/null's numbers; Slurm drops a gpu GRES with
#   no file): Slurm allocates it, the worker finds no CUDA device there and
#   trains on CPU replicas;
# - tasks are bound to cores by default (task/affinity, CpuBind=cores, as
#   many sites do), so a step that gets fewer CPUs than its job shows;
# - KillWait is Slurm's default, the 30 s between a stop's SIGTERM and its
#   SIGKILL;
# - the job credential lives 10 s instead of 120: a requeued job waits that
#   long before it may start again.
TASK_PLUGIN=task/none CPU_BIND="" GRES_TYPES="" NODE_GRES="" KILL_WAIT=5 CRED_EXPIRE=""
if [[ $MODE == sbatch ]]; then
  TASK_PLUGIN=task/affinity CPU_BIND="CpuBind=cores" GRES_TYPES="GresTypes=gpu" NODE_GRES="Gres=gpu:1" KILL_WAIT=30
  CRED_EXPIRE=",cred_expire=10"
  mkdir -p "$WORK/dev" || fail "cannot create $WORK/dev"
  # (Without mknod a plain file does too; slurmd then logs that it is no device.)
  mknod "$WORK/dev/nvidia0" c 1 3 2>/dev/null || : >"$WORK/dev/nvidia0" || fail "cannot create $WORK/dev/nvidia0"
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s\n' "$NODE" "$WORK/dev/nvidia0" >"$WORK/gres.conf"
fi
cat >"$SLURM_CONF" <<EOF
ClusterName=mirroredtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET$CRED_EXPIRE
StateSaveLocation=$WORK/ctld
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=$TASK_PLUGIN
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=$KILL_WAIT
InactiveLimit=0
$GRES_TYPES
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS $NODE_GRES State=UNKNOWN
PartitionName=mirrored Nodes=$NODE Default=YES MaxTime=10 State=UP $CPU_BIND
EOF

# --- daemons ------------------------------------------------------------------
slurmctld -D -i -f "$SLURM_CONF" >>"$WORK/slurmctld.log" 2>&1 &
DAEMON_PIDS+=($!)
slurmd -D -N "$NODE" -f "$SLURM_CONF" >>"$WORK/slurmd.log" 2>&1 &
DAEMON_PIDS+=($!)
deadline=$((SECONDS + NODE_IDLE_DEADLINE))
state=""
until [[ $state == idle* ]]; do
  kill -0 "${DAEMON_PIDS[1]}" 2>/dev/null || skip "slurmctld exited at start (see slurmctld.log below)"
  kill -0 "${DAEMON_PIDS[2]}" 2>/dev/null || skip "slurmd exited at start (see slurmd.log below)"
  ((SECONDS < deadline)) || skip "node $NODE did not become idle within ${NODE_IDLE_DEADLINE}s (sinfo says '$state')"
  sleep 0.2
  state=$(timeout 5 sinfo -h -N -n "$NODE" -o %T 2>/dev/null | head -n 1)
done
log "Slurm is up: node $NODE idle (slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT, $CPUS CPUs${NODE_GRES:+, $NODE_GRES})"
export OMP_NUM_THREADS=1
cd "$WORK" || fail "cannot enter $WORK"

# --- the srun mode: one job step ------------------------------------------------
# Two tasks on the one node: --from-slurm gives them worker:0 and worker:1 at
# $NODE:$WORKER_PORT_BASE and $NODE:$((WORKER_PORT_BASE + 1)) (port base plus
# the local task offset).
run_srun_mode() {
  local rc line fp t fps=()
  export MIRRORED_JOB_TOKEN="slurm-$TAG"
  timeout "$SRUN_DEADLINE" srun -n 2 -N 1 --overcommit --kill-on-bad-exit=1 --time=5 --job-name=mirrored-test \
    "$LAUNCH" cluster --from-slurm --slurm-port-base "$WORKER_PORT_BASE" --run-dir "$WORK/run" --grace-period 2 -- \
    --model mlp --max-steps "$STEPS" --batch-per-replica 16 --log-every 50 --no-validate --cpu-replicas 1 \
    --heartbeat-interval 0.2 --heartbeat-timeout 1 --registration-timeout 60 >"$WORK/srun.out" 2>&1 &
  wait $!   # (in the background so that SIGINT/SIGTERM reach the teardown at once)
  rc=$?
  ((rc == 124)) && fail "srun did not finish within ${SRUN_DEADLINE}s"
  ((rc == 0)) || fail "srun exited $rc, expected 0"

  # The cluster came from Slurm: the chief (SLURM_PROCID 0) served the job at
  # the port base on the step's node.
  grep -q "coordination service listening on .*:$WORKER_PORT_BASE\$" "$WORK/srun.out" ||
    fail "worker:0 did not report its coordination service on port $WORKER_PORT_BASE (--slurm-port-base)"
  for t in 0 1; do
    line=$(grep -m1 "^\[worker:$t\] done: $STEPS steps;" "$WORK/srun.out") ||
      fail "task worker:$t did not print 'done: $STEPS steps'"
    fp=$(sed -n 's/.*weights fingerprint \([0-9a-f]*\).*/\1/p' <<<"$line")
    [[ -n $fp ]] || fail "task worker:$t printed no weights fingerprint: $line"
    fps+=("$fp")
    log "worker:$t: $line"
  done
  [[ ${fps[0]} == "${fps[1]}" ]] || fail "the tasks finished with different weights: worker:0 ${fps[0]}, worker:1 ${fps[1]}"
  log "PASS: srun -n 2 trained $STEPS steps on node $NODE, both tasks exit 0 with weights fingerprint ${fps[0]}"
}

# A user's program in place of mirrored-worker (docs/user-programs.md): the
# same step, `-- python3 user_program.py`. Each task must get its TF_CONFIG
# address from Slurm, bind it itself and reach the other task's, with
# torch.distributed's ranks in Slurm's order.
run_program_step() {
  local rc t program
  program="$TEST_DIR/../launcher/user_program.py"
  timeout "$SRUN_DEADLINE" srun -n 2 -N 1 --overcommit --kill-on-bad-exit=1 --time=5 --job-name=mirrored-program \
    "$LAUNCH" cluster --from-slurm --slurm-port-base "$WORKER_PORT_BASE" --run-dir "$WORK/program-run" \
    --grace-period 2 -- python3 "$program" --tag slurm >"$WORK/program.out" 2>&1 &
  wait $!
  rc=$?
  ((rc == 124)) && fail "srun of the user program did not finish within ${SRUN_DEADLINE}s"
  ((rc == 0)) || { tail -n 20 "$WORK/program.out"; fail "srun of the user program exited $rc, expected 0"; }
  for t in 0 1; do
    grep -q "^\[worker:$t\] worker:$t tag=slurm RANK=$t WORLD_SIZE=2 LOCAL_RANK=$t MASTER_ADDR=" "$WORK/program.out" ||
      { tail -n 20 "$WORK/program.out"; fail "worker:$t's program did not get RANK=$t of 2 from the Slurm step"; }
    grep -q "^\[worker:$t\] worker:$t done" "$WORK/program.out" ||
      { tail -n 20 "$WORK/program.out"; fail "worker:$t's program did not meet the other task"; }
  done
  log "PASS: srun -n 2 ran python3 user_program.py under mirrored-launch: both bound their TF_CONFIG ports and met"
}

case $MODE in
  srun)
    run_srun_mode
    run_program_step
    ;;
  sbatch)
    # shellcheck source-path=SCRIPTDIR source=slurm_sbatch_jobs.sh
    source "$TEST_DIR/slurm_sbatch_jobs.sh" || fail "cannot read $TEST_DIR/slurm_sbatch_jobs.sh"
    run_sbatch_mode
    ;;
esac
exit 0
