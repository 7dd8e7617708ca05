#!/usr/bin/env bash
# Only what is needed listens, and only on loopback, for a local job: the
# chief's coordination service, Gloo's rendezvous while the mesh forms,
# nothing else. Probe D11 found NCCL's bootstrap listener open on the
# external interface for the whole of a CPU-only job (its NCCL id was made
# anyway); a CPU job now makes none.
#
#   tests/security/listening_sockets_test.sh BIN_DIR
set -euo pipefail
bin=$1
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2)"; exit 77; }
work=$(mktemp -d)
launcher=
trap 'kill "$launcher" 2>/dev/null || true; wait; rm -rf "$work"' EXIT

"$bin/mirrored-launch" local --workers 2 --cpu-replicas 1 --run-dir "$work/run" -- \
  --model mlp --epochs 20 --max-steps 3000 --no-validate >"$work/out" 2>&1 &
launcher=$!
for _ in $(seq 300); do  # up to 30 s to start training
  grep -q "step 50/" "$work/out" && break
  sleep 0.1
done
grep -q "step 50/" "$work/out" || { echo "FAIL: the job never trained"; cat "$work/out"; exit 1; }

pids=$(pgrep -d '|' -P "$launcher" || true)
[[ -n $pids ]] || { echo "FAIL: no worker processes under the launcher"; exit 1; }
# Every listening TCP socket of the launcher and its workers: "addr:port pid".
listening=$(ss -ltnpH | grep -E "pid=($launcher|$pids)," | awk '{print $4}')
echo "listening: $(tr '\n' ' ' <<<"$listening")"
[[ -n $listening ]] || { echo "FAIL: not even the coordination service listens"; exit 1; }
bad=$(grep -vE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):[0-9]+$' <<<"$listening" || true)
if [[ -n $bad ]]; then
  echo "FAIL: a local job listens beyond loopback: $bad"; ss -ltnp; exit 1
fi
kill "$launcher"
wait "$launcher" || true
launcher=
echo "PASS: a local CPU job listens on loopback only"
