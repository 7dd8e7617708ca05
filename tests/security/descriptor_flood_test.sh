#!/usr/bin/env bash
# Probe D8: a flood of idle connections to the chief's coordination port,
# with no token, took every file descriptor of a chief started under
# `ulimit -n 1024`; its next checkpoint could not be created and the job
# died; and gRPC 1.51 closed its listener on the first accept that failed
# for want of a descriptor, so the chief never accepted a connection again.
# Now the chief closes a connection that would take one of the descriptors
# it keeps in reserve (worker/coordination/accept_guard.h), and connections
# that never finish gRPC's handshake are dropped (kServerHandshakeTimeout):
# the job trains on and ends 0 with its final checkpoint, and once the
# flood is gone the service accepts and answers a new connection.
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
# chief has refused some (at most kHold s), while it checkpoints every 25
# steps; then let go, and a new connection must get a TLS answer.
python3 - "$port" "$connections" "$log" <<'PY'
import socket, ssl, sys, time
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
hold_until = time.monotonic() + 20  # kHold
while time.monotonic() < hold_until:
    with open(log, errors="replace") as f:
        if "refused 1 connection(s)" in f.read():
            break
    time.sleep(0.2)
for s in held:
    s.close()

def answered():
    """True when the service accepts and answers a TLS client hello (a
    refusal of this client's missing certificate is an answer too)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            with context.wrap_socket(s, server_hostname="localhost"):
                return True
    except ssl.SSLError:
        return True
    except OSError:  # closed while the flood's descriptors are freed; a timeout: nobody accepts
        return False

answer_until = time.monotonic() + 15  # the chief frees the flood's descriptors as it reads their ends
while not answered():
    if time.monotonic() > answer_until:
        sys.exit("FAIL: after the flood the coordination service no longer accepts connections")
    time.sleep(0.5)
print("a new connection after the flood was answered", flush=True)
PY

rc=0
wait $launcher || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: the job under a connection flood ended $rc"; cat "$work/out"; exit 1
fi
[[ -f $work/run/checkpoints/ckpt-2000/state.json ]] || { echo "FAIL: no final checkpoint"; ls "$work/run/checkpoints"; exit 1; }
# The flood did reach the reserve (else this test proves nothing), and
# gRPC's listener never failed for want of a descriptor.
grep -q "refused 1 connection(s)" "$log" ||
  { echo "FAIL: the chief refused no connection: no flood to survive"; cat "$log"; exit 1; }
if grep -q "Failed accept4" "$log"; then
  echo "FAIL: gRPC's listener ran out of descriptors"; grep "Failed accept4" "$log"; exit 1
fi
echo "PASS: trained through $connections idle connections with $limit descriptors"
