#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2086  # functions run from traps; pid lists split on purpose
# Real multi-host test of `mirrored-launch cluster`: three "hosts" made of
# network namespaces, each with its own address on a private bridge, each
# running this host's task of one TF_CONFIG cluster.
#
#   netns_cluster_test.sh BIN_DIR train      # all three train; identical final weights
#   netns_cluster_test.sh BIN_DIR hostnames  # the same with host names, each host's own on 127.0.1.1
#   netns_cluster_test.sh BIN_DIR link-cut   # cut worker:2's link mid-run; the others exit 3 naming it
#   netns_cluster_test.sh BIN_DIR chief-link-cut  # the same for the chief worker:0 (the service host)
#   netns_cluster_test.sh BIN_DIR kill       # SIGKILL worker:1's host mid-run; the others exit 3 naming it
#   netns_cluster_test.sh BIN_DIR restart    # SIGKILL worker:1's task mid-run, every launcher with --max-restarts 1:
#                                            # all restart, resume from the chief's checkpoint, identical weights
#   netns_cluster_test.sh BIN_DIR tls        # all three train over mutual TLS (`mirrored-launch certs` for the
#                                            # namespace addresses); a capture of the chief's veth holds no token
#   netns_cluster_test.sh BIN_DIR two-per-host  # 2 hosts x 2 tasks: shared memory within each host, Gloo
#                                            # between them; the same weights as 4 tasks over Gloo alone
#
# Exit status: 0 pass, 1 fail, 77 skipped (no root, no iproute2, or the
# kernel refuses namespaces/veth/bridge). Topology, per run (names carry
# this script's pid so that concurrent runs never collide):
#
#   mh<pid>s  (switch namespace)  bridge br0 --+-- mh<pid>p0 <-veth-> mh<pid>v0 in mh<pid>h0  10.231.0.10
#                                               +-- mh<pid>p1 <-veth-> mh<pid>v1 in mh<pid>h1  10.231.0.11
#                                               +-- mh<pid>p2 <-veth-> mh<pid>v2 in mh<pid>h2  10.231.0.12
#
# Nothing is routed anywhere else: the namespaces have no default route and
# the bridge no uplink. Teardown (trap on EXIT) kills every process left in
# the namespaces and deletes them (and their /etc/netns/<ns> files),
# whatever happened; namespaces of an earlier run that was SIGKILLed (its pid
# is gone) are reaped at start.
set -u -o pipefail

USAGE="usage: netns_cluster_test.sh BIN_DIR train|hostnames|link-cut|chief-link-cut|kill|restart|tls|two-per-host"
BIN_DIR=${1:?$USAGE}
MODE=${2:?$USAGE}
readonly NUM_HOSTS=3
readonly PORT=2222
readonly SUBNET_PREFIX=10.231.0
# Bounded waits (seconds). TRAIN_DEADLINE covers a whole training run on a
# loaded 2-core machine; LOSS_DEADLINE is how fast the survivors must stop
# after a host is lost (heartbeat timeout 1 s plus the launcher's teardown).
readonly SETUP_DEADLINE=5
readonly TRAIN_DEADLINE=95
readonly PROGRESS_DEADLINE=60
readonly LOSS_DEADLINE=10

LAUNCH="$BIN_DIR/mirrored-launch"
WORKER="$BIN_DIR/mirrored-worker"
PREFIX="mh$$"
SWITCH="${PREFIX}s"
NAMESPACES=()
WORK=""
KEEP_WORK=${MULTIHOST_KEEP_WORK:-0}  # 1: keep the work directory (logs) even on success

log() { echo "netns_cluster_test[$MODE]: $*"; }
skip() {
  echo "SKIPPED: netns_cluster_test[$MODE]: $*"
  exit 77
}
fail() {
  echo "FAIL: netns_cluster_test[$MODE]: $*"
  KEEP_WORK=1
  if [[ -n $WORK ]]; then
    for f in "$WORK"/host*.out; do
      [[ -f $f ]] || continue
      echo "----- last lines of $f"
      tail -n 25 "$f"
    done
  fi
  exit 1
}

host_ns() { echo "${PREFIX}h$1"; }
host_addr() { echo "$SUBNET_PREFIX.$((10 + $1))"; }

# Every pid in namespace $1 (empty when none; `ip netns pids` reads /proc).
ns_pids() { ip netns pids "$1" 2>/dev/null | tr '\n' ' '; }

teardown() {
  local rc=$? ns pids deadline
  trap - EXIT INT TERM
  for ns in "${NAMESPACES[@]}"; do
    pids=$(ns_pids "$ns")
    [[ -n ${pids// /} ]] && kill -KILL $pids 2>/dev/null
  done
  # Killed processes leave /proc at their own pace; wait for them (bounded)
  # so that `ip netns del` does not leave a namespace pinned by a zombie.
  deadline=$((SECONDS + 5))
  for ns in "${NAMESPACES[@]}"; do
    while [[ -n $(ns_pids "$ns" | tr -d ' ') ]] && ((SECONDS < deadline)); do sleep 0.1; done
    pids=$(ns_pids "$ns")
    [[ -n ${pids// /} ]] && echo "netns_cluster_test[$MODE]: warning: pids $pids still in $ns at teardown"
  done
  wait 2>/dev/null
  for ns in "${NAMESPACES[@]}"; do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null
  # A veth whose move into a namespace failed is still in this namespace.
  for ((i = 0; i < NUM_HOSTS; i++)); do ip link del "${PREFIX}v$i" 2>/dev/null; done
  if [[ -n $WORK ]]; then
    if ((KEEP_WORK)); then echo "netns_cluster_test[$MODE]: kept $WORK for inspection"; else rm -rf "$WORK"; fi
  fi
  exit "$rc"
}
trap teardown EXIT
trap 'log "interrupted (SIGINT/SIGTERM): tearing down"; exit 1' INT TERM

# Namespaces of earlier runs that were killed before their teardown (a CTest
# timeout sends SIGKILL): named mh<pid>..., their pid is gone. Their
# processes are that run's launchers and workers.
reap_stale_runs() {
  local ns owner pids
  for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(mh[0-9]\+\(s\|h[0-9]\)\)\( .*\)\?$/\1/p'); do
    owner=${ns#mh}
    owner=${owner%s}
    owner=${owner%h[0-9]}
    ((owner != $$)) && kill -0 "$owner" 2>/dev/null && continue
    pids=$(ns_pids "$ns")
    [[ -n ${pids// /} ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null && log "removed stale namespace $ns (its run, pid $owner, is gone)"
    rm -rf "/etc/netns/$ns"
  done
}

# --- preconditions: skip (77) only where namespaces cannot be made --------
[[ $MODE =~ ^(train|hostnames|link-cut|chief-link-cut|kill|restart|tls|two-per-host)$ ]] ||
  fail "unknown mode '$MODE' (train, hostnames, link-cut, chief-link-cut, kill, restart, tls or two-per-host)"
[[ -x $LAUNCH ]] || fail "$LAUNCH is missing or not executable (build the mirrored-launch target)"
[[ -x $WORKER ]] || fail "$WORKER is missing or not executable (build the mirrored-worker target)"
((EUID == 0)) || skip "needs root to create network namespaces (ip netns); running as uid $EUID"
command -v ip >/dev/null || skip "iproute2's 'ip' is not installed"
reap_stale_runs
if ! err=$(ip netns add "$SWITCH" 2>&1); then skip "cannot create a network namespace: $err"; fi
NAMESPACES+=("$SWITCH")

# --- topology ---------------------------------------------------------------
# Commands that must succeed once namespaces exist; a failure here is a skip
# only for the kernel features themselves (veth, bridge).
ns_run() { ip netns exec "$@"; }
if ! err=$(ns_run "$SWITCH" ip link add br0 type bridge 2>&1); then
  skip "cannot create a bridge in a network namespace: $err"
fi
ns_run "$SWITCH" ip link set br0 up || fail "cannot bring up br0 in $SWITCH"
ns_run "$SWITCH" ip link set lo up || fail "cannot bring up lo in $SWITCH"
for ((i = 0; i < NUM_HOSTS; i++)); do
  ns=$(host_ns "$i")
  ip netns add "$ns" || fail "cannot create namespace $ns"
  NAMESPACES+=("$ns")
  if ! err=$(ip link add "${PREFIX}v$i" type veth peer name "${PREFIX}p$i" 2>&1); then
    skip "cannot create a veth pair: $err"
  fi
  ip link set "${PREFIX}v$i" netns "$ns" || fail "cannot move ${PREFIX}v$i into $ns"
  ip link set "${PREFIX}p$i" netns "$SWITCH" || fail "cannot move ${PREFIX}p$i into $SWITCH"
  ns_run "$SWITCH" ip link set "${PREFIX}p$i" master br0 || fail "cannot attach ${PREFIX}p$i to br0"
  ns_run "$SWITCH" ip link set "${PREFIX}p$i" up || fail "cannot bring up ${PREFIX}p$i"
  ns_run "$ns" ip link set lo up || fail "cannot bring up lo in $ns"
  ns_run "$ns" ip addr add "$(host_addr "$i")/24" dev "${PREFIX}v$i" || fail "cannot address ${PREFIX}v$i"
  ns_run "$ns" ip link set "${PREFIX}v$i" up || fail "cannot bring up ${PREFIX}v$i in $ns"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-multihost.XXXXXX") || fail "cannot create a temporary directory"
RUN_DIR="$WORK/run"   # the "shared file system" of the three hosts
TOKEN="netns-$$-$RANDOM$RANDOM"

# Reachability first (bounded): a TCP connect from host 0 to every host's
# address, so that a broken bridge fails here with a clear message instead of
# as a registration timeout. bash's /dev/tcp: "connection refused" proves the
# peer's stack answered; a timeout means no path.
probe_path() {  # probe_path FROM_INDEX TO_INDEX
  local out
  out=$(ns_run "$(host_ns "$1")" timeout 2 bash -c "exec 3<>/dev/tcp/$(host_addr "$2")/9" 2>&1)
  [[ $? -ne 124 ]] && [[ $out != *"No route"* ]] && [[ $out != *"unreachable"* ]]
}
deadline=$((SECONDS + SETUP_DEADLINE))
for ((i = 1; i < NUM_HOSTS; i++)); do
  until probe_path 0 "$i"; do
    ((SECONDS < deadline)) || fail "no TCP path from $(host_addr 0) to $(host_addr "$i") across the bridge within ${SETUP_DEADLINE}s"
    sleep 0.2
  done
done

# hostnames mode: the cluster names hosts mhost0..2, and each namespace gets
# the /etc/hosts of a stock Debian host (`ip netns exec` bind-mounts
# /etc/netns/NS/hosts): its own name on 127.0.1.1, the others' on their
# addresses (as DNS would give them).
host_name() { echo "mhost$1"; }
if [[ $MODE == hostnames ]]; then
  for ((i = 0; i < NUM_HOSTS; i++)); do
    mkdir -p "/etc/netns/$(host_ns "$i")" || fail "cannot create /etc/netns/$(host_ns "$i")"
    {
      echo "127.0.0.1 localhost"
      for ((j = 0; j < NUM_HOSTS; j++)); do
        if ((j == i)); then echo "127.0.1.1 $(host_name "$j")"; else echo "$(host_addr "$j") $(host_name "$j")"; fi
      done
    } >"/etc/netns/$(host_ns "$i")/hosts" || fail "cannot write /etc/netns/$(host_ns "$i")/hosts"
  done
fi
TF_CLUSTER=""
for ((i = 0; i < NUM_HOSTS; i++)); do
  if [[ $MODE == hostnames ]]; then h=$(host_name "$i"); else h=$(host_addr "$i"); fi
  TF_CLUSTER+="${TF_CLUSTER:+,}\"$h:$PORT\""
done

# start_host INDEX MAX_STEPS: this host's `mirrored-launch cluster`, in its
# namespace, in the background; its exit status lands in $WORK/host<i>.rc.
# EXTRA_LAUNCH / EXTRA_WORKER: more flags for the launcher / the task.
EXTRA_LAUNCH=() EXTRA_WORKER=()
start_host() {
  local i=$1 steps=$2
  local tf="{\"cluster\":{\"worker\":[$TF_CLUSTER]},\"task\":{\"type\":\"worker\",\"index\":$i}}"
  local tls_env=()  # tls mode: this host's files from `mirrored-launch certs`
  if [[ $MODE == tls ]]; then
    local d
    d="$WORK/tls/$(host_addr "$i")"
    tls_env=(MIRRORED_TLS_CA="$d/ca.pem" MIRRORED_TLS_CERT="$d/cert.pem" MIRRORED_TLS_KEY="$d/key.pem")
  fi
  (
    ns_run "$(host_ns "$i")" env TF_CONFIG="$tf" MIRRORED_JOB_TOKEN="$TOKEN" OMP_NUM_THREADS=1 "${tls_env[@]}" \
      "$LAUNCH" cluster --run-dir "$RUN_DIR" --grace-period 2 "${EXTRA_LAUNCH[@]}" -- \
      --model mlp --max-steps "$steps" --batch-per-replica 16 --log-every 10 --no-validate "${EXTRA_WORKER[@]}" \
      --cpu-replicas 1 --heartbeat-interval 0.2 --heartbeat-timeout 1 --registration-timeout 60 --collective-timeout 30 \
      >"$WORK/host$i.out" 2>&1
    echo $? >"$WORK/host$i.rc.tmp" && mv "$WORK/host$i.rc.tmp" "$WORK/host$i.rc"
  ) &
}

# two-per-host: task t of 4 runs in host t/2's namespace, on port PORT+t%2.
# start_task TASK MAX_STEPS: its launcher in the background, its output in
# $WORK/host<t>.out and its exit status in $WORK/host<t>.rc (the files of
# start_host, with tasks for hosts).
readonly TASKS_PER_HOST=2 PAIRED_TASKS=4
start_task() {
  local t=$1 steps=$2 cluster="" j
  for ((j = 0; j < PAIRED_TASKS; j++)); do
    cluster+="${cluster:+,}\"$(host_addr $((j / TASKS_PER_HOST))):$((PORT + j % TASKS_PER_HOST))\""
  done
  local tf="{\"cluster\":{\"worker\":[$cluster]},\"task\":{\"type\":\"worker\",\"index\":$t}}"
  (
    ns_run "$(host_ns $((t / TASKS_PER_HOST)))" env TF_CONFIG="$tf" MIRRORED_JOB_TOKEN="$TOKEN" OMP_NUM_THREADS=1 \
      "${TASK_ENV[@]}" "$LAUNCH" cluster --run-dir "$RUN_DIR" --grace-period 2 -- \
      --model mlp --max-steps "$steps" --batch-per-replica 16 --log-every 10 --no-validate \
      --cpu-replicas 1 --heartbeat-interval 0.2 --heartbeat-timeout 1 --registration-timeout 60 --collective-timeout 30 \
      >"$WORK/host$t.out" 2>&1
    echo $? >"$WORK/host$t.rc.tmp" && mv "$WORK/host$t.rc.tmp" "$WORK/host$t.rc"
  ) &
}
TASK_ENV=()

# wait_hosts DEADLINE_SECONDS INDEX...: until each listed host has exited.
wait_hosts() {
  local limit=$1 i pending
  shift
  local deadline=$((SECONDS + limit))
  while :; do
    pending=()
    for i in "$@"; do [[ -f $WORK/host$i.rc ]] || pending+=("$i"); done
    ((${#pending[@]} == 0)) && return 0
    ((SECONDS < deadline)) || fail "host(s) ${pending[*]} still running after ${limit}s"
    sleep 0.1
  done
}
host_rc() { cat "$WORK/host$1.rc"; }

# The launcher must not leave its worker behind: once host i's launcher has
# exited, its namespace holds no process (bounded wait for /proc to settle).
expect_namespace_empty() {
  local ns deadline=$((SECONDS + 3))
  ns=$(host_ns "$1")
  while [[ -n $(ns_pids "$ns" | tr -d ' ') ]]; do
    ((SECONDS < deadline)) || fail "host $1's launcher exited but left processes in $ns: $(ns_pids "$ns")"
    sleep 0.1
  done
}

fingerprint_of() {  # the fingerprint host i's task printed, or empty
  sed -n 's/.*done: [0-9]* steps;.*weights fingerprint \([0-9a-f]*\).*/\1/p' "$WORK/host$1.out" | tail -n 1
}

# expect_all_succeeded TEXT: every host exited 0, printed TEXT and the same
# weights fingerprint (left in $want), and left nothing in its namespace.
expect_all_succeeded() {
  local text=$1 i rc fp
  want=""
  for ((i = 0; i < NUM_HOSTS; i++)); do
    rc=$(host_rc "$i")
    ((rc == 0)) || fail "host $i (worker:$i at $(host_addr "$i")) exited $rc, expected 0"
    grep -q "$text" "$WORK/host$i.out" || fail "host $i did not print '$text'"
    fp=$(fingerprint_of "$i")
    [[ -n $fp ]] || fail "host $i printed no weights fingerprint"
    want=${want:-$fp}
    [[ $fp == "$want" ]] || fail "host $i finished with weights fingerprint $fp, host 0 with $want"
    expect_namespace_empty "$i"
    log "worker:$i at $(host_addr "$i"): exit 0, '$text', weights fingerprint $fp"
  done
}

# capture_start PORT_INDEX FILE: every frame through host PORT_INDEX's
# switch-side veth, appended to FILE until capture_stop (a packet socket:
# tcpdump need not be installed).
capture_start() {
  ns_run "$SWITCH" python3 -c '
import signal, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
with open(sys.argv[2], "wb") as out:
    print("capturing", flush=True)
    while not stop:
        try:
            out.write(s.recv(65536))
        except socket.timeout:
            pass
' "${PREFIX}p$1" "$2" >"$2.log" 2>&1 &
  CAPTURE_PID=$!
  local deadline=$((SECONDS + SETUP_DEADLINE))
  until grep -q capturing "$2.log" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "the packet capture did not start: $(cat "$2.log")"
    sleep 0.1
  done
}
capture_stop() { kill -TERM "$CAPTURE_PID" && wait "$CAPTURE_PID"; }

case $MODE in
  tls)
    "$LAUNCH" certs "$WORK/tls" --hosts "$(host_addr 0),$(host_addr 1),$(host_addr 2)" >"$WORK/certs.out" 2>&1 ||
      fail "mirrored-launch certs failed: $(cat "$WORK/certs.out")"
    capture_start 0 "$WORK/chief-veth.cap"
    for ((i = 0; i < NUM_HOSTS; i++)); do start_host "$i" 30; done
    wait_hosts "$TRAIN_DEADLINE" 0 1 2
    capture_stop
    expect_all_succeeded "done: 30 steps"
    grep -q "the coordination service speaks mutual TLS" "$WORK/host0.out" ||
      fail "the chief did not report serving mutual TLS"
    # Gloo's gradients crossed this veth too (plaintext): the capture saw the job.
    size=$(stat -c %s "$WORK/chief-veth.cap")
    ((size > 100000)) || fail "the capture of the chief's veth holds only $size bytes: it missed the job"
    grep -qaF "$TOKEN" "$WORK/chief-veth.cap" && fail "the job token travelled in clear on the chief's veth"
    log "PASS: $NUM_HOSTS hosts trained over mutual TLS ($want); $size bytes captured on the chief's veth, no token"
    ;;
  two-per-host)
    # The same job over Gloo alone first (MIRRORED_HOST_TRANSPORT=gloo), then
    # with each host's pair in shared memory: the same sums, the same weights.
    TASK_ENV=(MIRRORED_HOST_TRANSPORT=gloo)
    RUN_DIR="$WORK/gloo"
    for ((t = 0; t < PAIRED_TASKS; t++)); do start_task "$t" 30; done
    wait_hosts "$TRAIN_DEADLINE" 0 1 2 3
    gloo_fp=$(fingerprint_of 0)
    [[ -n $gloo_fp && $(host_rc 0) == 0 ]] || fail "the Gloo-only run failed: $(tail -5 "$WORK/host0.out")"
    for ((t = 0; t < PAIRED_TASKS; t++)); do mv "$WORK/host$t.out" "$WORK/gloo$t.out" && rm "$WORK/host$t.rc"; done
    TASK_ENV=()
    RUN_DIR="$WORK/paired"
    for ((t = 0; t < PAIRED_TASKS; t++)); do start_task "$t" 30; done
    wait_hosts "$TRAIN_DEADLINE" 0 1 2 3
    paired_fp=$(fingerprint_of 0)
    for ((t = 0; t < PAIRED_TASKS; t++)); do
      rc=$(host_rc "$t")
      ((rc == 0)) || fail "task worker:$t exited $rc: $(tail -5 "$WORK/host$t.out")"
      grep -q "on 2 host(s) (2+2 tasks): shared memory within each host, Gloo between the hosts' first tasks" \
        "$WORK/host$t.out" || fail "worker:$t did not say it takes shared memory within its host"
      fp=$(fingerprint_of "$t")
      [[ -n $fp && $fp == "$paired_fp" ]] || fail "worker:$t ended with weights $fp, worker:0 with $paired_fp"
    done
    for ((i = 0; i < 2; i++)); do expect_namespace_empty "$i"; done
    # The sums are the same up to their order (a host's pair first): the
    # final loss agrees with the Gloo-only run's to float rounding.
    loss_of() { sed -n 's/.*done: [0-9]* steps; loss \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }
    gloo_loss=$(loss_of "$WORK/gloo0.out") paired_loss=$(loss_of "$WORK/host0.out")
    awk -v a="$gloo_loss" -v b="$paired_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * a) }' ||
      fail "final loss $paired_loss with shared memory, $gloo_loss over Gloo alone"
    log "PASS: 2 hosts x 2 tasks, shared memory within each host and Gloo between: every task at weights" \
      "$paired_fp, loss $paired_loss (Gloo alone: $gloo_loss)"
    ;;
  train | hostnames)
    if [[ $MODE == train ]]; then STEPS=200; else STEPS=30; fi
    for ((i = 0; i < NUM_HOSTS; i++)); do start_host "$i" "$STEPS"; done
    wait_hosts "$TRAIN_DEADLINE" 0 1 2
    expect_all_succeeded "done: $STEPS steps"
    # The coordination service listened on the chief's namespace address.
    # (Each Gloo mesh endpoint is bound to its host's own address: loopback
    # is not reachable from the other namespaces, so training proves it.)
    if [[ $MODE == train ]]; then
      grep -q "listening on $(host_addr 0):$PORT" "$WORK/host0.out" ||
        fail "the chief did not report its coordination service on $(host_addr 0):$PORT"
    fi
    log "PASS: $NUM_HOSTS hosts trained $STEPS steps with identical final weights ($want)"
    ;;
  link-cut | chief-link-cut | kill)
    case $MODE in link-cut) VICTIM=2 ;; chief-link-cut) VICTIM=0 ;; kill) VICTIM=1 ;; esac
    SURVIVORS=()
    for ((i = 0; i < NUM_HOSTS; i++)); do ((i == VICTIM)) || SURVIVORS+=("$i"); done
    # Far more steps than the test lasts: the run is cut mid-training.
    for ((i = 0; i < NUM_HOSTS; i++)); do start_host "$i" 100000; done
    # Mid-run: the chief has logged training progress (step 20), so every
    # task has registered and the Gloo mesh carries gradients.
    deadline=$((SECONDS + PROGRESS_DEADLINE))
    until grep -q "\\] step 20/" "$WORK/host0.out" 2>/dev/null; do
      for ((i = 0; i < NUM_HOSTS; i++)); do
        [[ -f $WORK/host$i.rc ]] && fail "host $i exited $(host_rc "$i") before training reached step 20"
      done
      ((SECONDS < deadline)) || fail "the chief logged no 'step 20/' within ${PROGRESS_DEADLINE}s"
      sleep 0.1
    done
    cut_us=${EPOCHREALTIME/./}
    if [[ $MODE != kill ]]; then
      ns_run "$SWITCH" ip link set "${PREFIX}p$VICTIM" down || fail "cannot take ${PREFIX}p$VICTIM down"
      log "cut worker:$VICTIM's link (${PREFIX}p$VICTIM down in the switch)"
    else
      pids=$(ns_pids "$(host_ns "$VICTIM")")
      [[ -n ${pids// /} ]] || fail "no process found in $(host_ns "$VICTIM") to kill"
      kill -KILL $pids
      log "SIGKILLed every process of worker:$VICTIM's host: $pids"
    fi
    wait_hosts "$LOSS_DEADLINE" "${SURVIVORS[@]}"
    took_ms=$(((${EPOCHREALTIME/./} - cut_us) / 1000))
    for i in "${SURVIVORS[@]}"; do
      rc=$(host_rc "$i")
      ((rc == 3)) || fail "host $i exited $rc after worker:$VICTIM was lost, expected 3 (stopped because another task failed)"
      # The worker's last line names the lost task: "task worker:V failed"
      # for a peer (the chief's service saw it go), "hosted by task worker:0"
      # for the chief itself. After a forced abort it reads "mirrored-worker:
      # worker:i: <reason> (replicas did not stop ...)", without "error:".
      reason=$(grep -m1 -o -E "mirrored-worker: worker:$i: .*(task worker:$VICTIM failed|hosted by task worker:$VICTIM\)).*" \
        "$WORK/host$i.out")
      [[ -n $reason ]] || fail "host $i's output has no 'mirrored-worker: worker:$i: ...' line naming the lost task worker:$VICTIM"
      expect_namespace_empty "$i"
      log "host $i: exit 3: ${reason:0:220}"
    done
    if [[ $MODE != kill ]]; then
      # The isolated host stops by itself too (it lost the job), and its
      # launcher leaves nothing behind in its namespace.
      wait_hosts "$LOSS_DEADLINE" "$VICTIM"
      rc=$(host_rc "$VICTIM")
      ((rc != 0)) || fail "the isolated host $VICTIM exited 0 after its link was cut"
      expect_namespace_empty "$VICTIM"
      log "isolated host $VICTIM: exit $rc: $(grep -m1 -o "mirrored-worker: worker:$VICTIM: .*" "$WORK/host$VICTIM.out" | head -c 220)"
    fi
    log "PASS: after worker:$VICTIM was lost ($MODE) the survivors exited 3 naming it within ${took_ms} ms"
    ;;
  restart)
    STEPS=200
    EXTRA_LAUNCH=(--max-restarts 1) EXTRA_WORKER=(--checkpoint-every 20)
    # First uninterrupted, for the weights a restart must reproduce.
    RUN_DIR="$WORK/straight"
    for ((i = 0; i < NUM_HOSTS; i++)); do start_host "$i" "$STEPS"; done
    wait_hosts "$TRAIN_DEADLINE" 0 1 2
    (($(host_rc 0) == 0)) || fail "the uninterrupted run exited $(host_rc 0)"
    straight=$(fingerprint_of 0)
    [[ -n $straight ]] || fail "the uninterrupted run printed no weights fingerprint"
    for ((i = 0; i < NUM_HOSTS; i++)); do mv "$WORK/host$i.out" "$WORK/straight$i.out" && rm "$WORK/host$i.rc"; done
    RUN_DIR="$WORK/restarted"
    for ((i = 0; i < NUM_HOSTS; i++)); do start_host "$i" "$STEPS"; done
    deadline=$((SECONDS + PROGRESS_DEADLINE))
    until grep -q "\\] step 50/" "$WORK/host0.out" 2>/dev/null; do
      ((SECONDS < deadline)) || fail "the chief logged no 'step 50/' within ${PROGRESS_DEADLINE}s"
      sleep 0.1
    done
    # Only the task: its launcher stays and restarts it.
    victim=""
    for pid in $(ns_pids "$(host_ns 1)"); do
      [[ $(cat "/proc/$pid/comm" 2>/dev/null) == mirrored-worker ]] && victim=$pid
    done
    [[ -n $victim ]] || fail "no mirrored-worker process in $(host_ns 1)"
    kill -KILL "$victim"
    log "SIGKILLed worker:1's task (pid $victim); its launcher lives"
    wait_hosts "$TRAIN_DEADLINE" 0 1 2
    expect_all_succeeded "job succeeded after 1 restart"
    resumed=$(grep -m1 -o "resuming from [^ ]*ckpt-[0-9]*" "$WORK/host0.out")
    [[ -n $resumed ]] || fail "the restarted chief did not resume from a checkpoint"
    [[ $want == "$straight" ]] || fail "the restarted job ended with weights $want, the uninterrupted one with $straight"
    log "PASS: worker:1 killed at step >= 50; every host restarted once, the chief resumed from" \
      "${resumed##*/}; all ended with weights $want, as the uninterrupted run"
    ;;
esac
exit 0
