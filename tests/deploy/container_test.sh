#!/usr/bin/env bash
# CTest deploy_container (label container): builds the image with
# deploy/docker/build-local.sh (no registry; bases and caches reused from
# earlier runs) and runs in it, with podman:
#   1. mirrored-launch --help;
#   2. a local job of 2 workers (1 CPU replica each) and an evaluator, to its
#      end: exit 0 and the evaluator's final line;
#   3. mirrored-launch cluster in two containers on a podman network, acting
#      as hosts h1 and h2: TF_CONFIG names them, a job token, one shared run
#      directory; both exit 0 and the chief reports every step done.
#
#   tests/deploy/container_test.sh [--from-build BUILD_DIR] [STORE]
#
# CTest passes its own build tree as --from-build: the image then takes that
# build's binaries (the Dockerfile's build stage is skipped; a cold store
# needs about 5 minutes, not a half-hour compile). MIRRORED_CONTAINER_FROM_SOURCE=1
# builds the whole Dockerfile instead.
#
# STORE (default $MIRRORED_CONTAINER_STORE, else ~/.cache/mirrored/containers)
# holds podman's storage and caches: about 6 GB. Exit 77 (CTest: skipped)
# where podman cannot run here: not root, or podman/buildah/runc missing
# (scripts/install-deps.sh --test installs them on Debian).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
from_build=()
if [ "${1:-}" = --from-build ]; then
  [ "${MIRRORED_CONTAINER_FROM_SOURCE:-0}" = 1 ] || from_build=(--from-build "${2:?--from-build needs a directory}")
  shift 2
fi
store=${1:-${MIRRORED_CONTAINER_STORE:-$HOME/.cache/mirrored/containers}}
image=localhost/mirrored:test
steps=40
log() { echo "container_test: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $* (the container tests need rootful podman)"; exit 77; }

[ "$(id -u)" = 0 ] || skip "not root"
for tool in podman buildah runc debootstrap; do
  command -v "$tool" > /dev/null || skip "$tool is not installed (scripts/install-deps.sh --test installs it)"
done

start=$(date +%s)
"$repo/deploy/docker/build-local.sh" "$store" --tag "$image" "${from_build[@]}" || fail "the image did not build (above)"
# shellcheck source=/dev/null
. "$store/env.sh"
built=$(date +%s)
log "image ready in $((built - start)) s: $(podman image inspect --format '{{.Size}}' "$image" | awk '{ printf "%d MB", $1 / 1e6 }')"

work=$(mktemp -d "${TMPDIR:-/tmp}/mirrored-container-test.XXXXXX")
net=mirrored-test-$$
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do podman rm --force --time 2 "$c" > /dev/null 2>&1 || true; done
  podman network rm --force "$net" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# The image runs as uid 10001: the run directories must be writable by it.
mkdir -p "$work/local" "$work/cluster"
chown 10001 "$work/local" "$work/cluster"

# 1. --help
podman run --rm "$image" --help > "$work/help.txt" 2>&1 || { cat "$work/help.txt"; fail "mirrored-launch --help exited non-zero"; }
if ! grep -q 'cluster' "$work/help.txt" || ! grep -q 'local' "$work/help.txt"; then
  cat "$work/help.txt"; fail "--help lists no local/cluster"
fi
log "ok: --help ($(head -n 1 "$work/help.txt"))"

# 2. A local job with an evaluator, on the container's loopback only.
t=$(date +%s)
status=0
podman run --rm --network none -v "$work/local:/runs" "$image" \
  local --workers 2 --cpu-replicas 1 --evaluator --run-dir /runs/fmnist -- \
  --model mlp --max-steps "$steps" --log-every 20 > "$work/local.txt" 2>&1 || status=$?
grep -E '^\[(worker|evaluator):[0-9]+\] (done|evaluator done)' "$work/local.txt" || true
[ "$status" = 0 ] || { tail -n 30 "$work/local.txt"; fail "the local job exited $status"; }
final=$(grep -E '^\[evaluator:0\] .*evaluator done: .*final checkpoint ckpt-'"$steps"'\b' "$work/local.txt") \
  || { tail -n 30 "$work/local.txt"; fail "no evaluator final line for ckpt-$steps"; }
log "ok: local job, 2 workers + evaluator, in $(( $(date +%s) - t )) s; evaluator: ${final#*\] }"

# 3. Two containers as two hosts. Fixed addresses with --add-host: name
# resolution without the dnsname plugin, which Debian's podman lacks.
t=$(date +%s)
octet=$(( 100 + $$ % 150 ))
podman network create --subnet "10.89.$octet.0/24" "$net" > /dev/null || fail "podman network create $net"
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
tf_config() { echo '{"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":'"$1"'}}'; }
for i in 0 1; do
  host=h$((i + 1))
  containers+=("$net-$host")
  podman run -d --name "$net-$host" --hostname "$host" --network "$net" --ip "10.89.$octet.1$i" \
    --add-host "h1:10.89.$octet.10" --add-host "h2:10.89.$octet.11" \
    -e TF_CONFIG="$(tf_config "$i")" -e MIRRORED_JOB_TOKEN="$token" -v "$work/cluster:/runs" \
    "$image" cluster --run-dir /runs/fmnist -- --model mlp --cpu-replicas 1 --max-steps "$steps" --log-every 20 \
    > /dev/null || fail "podman run $host"
done
codes=()
for c in "${containers[@]}"; do
  codes+=("$(timeout 300 podman wait "$c" || echo timeout)")
done
for i in 0 1; do
  podman logs "${containers[$i]}" > "$work/h$((i + 1)).txt" 2>&1 || true
done
grep -hE '^\[worker:[0-9]\] done|^mirrored-launch: cluster task' "$work/h1.txt" "$work/h2.txt" || true
if [ "${codes[0]}" != 0 ] || [ "${codes[1]}" != 0 ]; then
  for h in h1 h2; do echo "--- $h"; tail -n 20 "$work/$h.txt"; done
  fail "cluster containers exited ${codes[*]} (h1 h2)"
fi
grep -qE "^\[worker:0\] done: $steps steps" "$work/h1.txt" || { tail -n 20 "$work/h1.txt"; fail "h1 (the chief) did not report $steps steps done"; }
grep -q 'h1:2222' "$work/h2.txt" || fail "h2 does not name the chief's coordination service at h1:2222"
log "ok: cluster pair h1 + h2 in $(( $(date +%s) - t )) s"
log "PASS in $(( $(date +%s) - start )) s (image $((built - start)) s)"
