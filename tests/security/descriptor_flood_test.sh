#!/usr/bin/env bash
# Probe D8: a flood of idle connections to the chief's coordination port,
# with no token, took every file descriptor of a chief started under
# `ulimit -n 1024`; its next checkpoint could not be created and the job
# died. Now the connections that never finish gRPC's handshake are dropped
# (kServerHandshakeTimeout), and the chief's checkpoint files wait for a
# descriptor: the job trains on and ends 0 with its final checkpoint.
#
#   tests/security/descriptor_flood_test.sh BIN_DIR
set -euo pipefail
bin=$1
work=$(mktemp -d)
launcher=
trap 'kill "$launcher" 2>/dev/null || true; wait; [[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
limit=256
connections=320

# The job alone runs with the low limit (soft and hard, as `ulimit -n` sets).
( ulimit -n $limit; exec "$bin/mirrored-launch" local --workers 2 --cpu-replicas 1 --run-dir "$work/run" -- \
    --model mlp --epochs 20 --max-steps 2000 --checkpoint-every 25 --no-validate ) >"$work/out" 2>&1 &
launcher=$!

log="$work/run/logs/worker:0.log"
port=
for _ in $(seq 300); do  # up to 30 s to form the job
  port=$(grep -oE 'coordination service listening on 127\.0\.0\.1:[0-9]+' "$log" 2>/dev/null | grep -oE '[0-9]+$' || true)
  [[ -n $port ]] && grep -q "step 50/" "$work/out" && break
  sleep 0.1
done
[[ -n $port ]] || { echo "FAIL: the job never started"; cat "$work/out"; exit 1; }

# More idle connections than the chief has descriptors, held until the
# chief has had to wait for one (at most kHold), while it checkpoints
# every 25 steps.
python3 - "$port" "$connections" "$log" <<'PY'
import socket, sys, time
port, n, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held, error = [], None
for _ in range(n):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError as e:  # the chief's backlog is full: it holds as many as it can
        error = e
print(f"holding {len(held)} connections ({error or 'all'})", flush=True)
if not held:
    sys.exit(f"no connection to port {port}: {error}")
hold_until = time.monotonic() + 20
while time.monotonic() < hold_until:
    with open(log, errors="replace") as f:
        if "out of file descriptors opening" in f.read():  # a checkpoint waited
            break
    time.sleep(0.2)
PY

rc=0
wait $launcher || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: the job under a connection flood ended $rc"; cat "$work/out"; exit 1
fi
[[ -f $work/run/checkpoints/ckpt-2000/state.json ]] || { echo "FAIL: no final checkpoint"; ls "$work/run/checkpoints"; exit 1; }
# The flood did take every descriptor (else this test proves nothing).
grep -qE "out of file descriptors opening|Failed accept4: Too many open files" "$log" ||
  { echo "FAIL: the chief never ran out of descriptors: no flood to survive"; cat "$log"; exit 1; }
echo "PASS: trained through $connections idle connections with $limit descriptors"
