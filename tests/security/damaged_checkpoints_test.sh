#!/usr/bin/env bash
# The probe's reproductions D12 and D13, end to end on mirrored-worker:
# - D12: one digit of the newest state.json changed ("epoch": 0 -> 7). It
#   was taken as training's place (a job ended early, exit 0); now the
#   checkpoint is damaged and the chief resumes from the one before.
# - D13: every checkpoint damaged. The job trained from step 0 over them;
#   now it exits 2 naming them and leaves them as they are, unless
#   --restart-from-scratch asks for the fresh start.
#
#   tests/security/damaged_checkpoints_test.sh BIN_DIR
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=$work/run
ckpts=$run/checkpoints
train() {  # max-steps [flags...]: output in $work/out, exit code in $rc
  local steps=$1
  shift
  rc=0
  "$bin/mirrored-worker" --model mlp --cpu-replicas 1 --no-validate --checkpoint-every 20 --run-dir "$run" \
    --max-steps "$steps" "$@" >"$work/out" 2>&1 || rc=$?
}
fail() { echo "FAIL: $*"; cat "$work/out"; exit 1; }

train 60
[[ $rc -eq 0 && -f $ckpts/ckpt-60/state.json ]] || fail "the first run did not leave ckpt-60 (exit $rc)"

# D12
grep -q '"epoch": 0,' "$ckpts/ckpt-60/state.json" || fail "ckpt-60 is not in epoch 0"
sed -i 's/"epoch": 0,/"epoch": 7,/' "$ckpts/ckpt-60/state.json"
train 80
[[ $rc -eq 0 ]] || fail "resuming past a changed state.json ended $rc"
grep -q "skipping checkpoint ckpt-60 .*state.json is damaged" "$work/out" || fail "ckpt-60 was not skipped as damaged"
grep -q "resuming from .*ckpt-40 (step 40" "$work/out" || fail "did not resume from ckpt-40"
[[ -f $ckpts/ckpt-80/state.json ]] || fail "no ckpt-80"

# D13
for model in "$ckpts"/ckpt-*/model.safetensors; do truncate -s 100 "$model"; done
train 120
[[ $rc -eq 2 ]] || fail "every checkpoint damaged: exit $rc, expected 2"
grep -q "every checkpoint in $ckpts is damaged (ckpt-20, ckpt-40, ckpt-60, ckpt-80)" "$work/out" ||
  fail "the error does not name the damaged checkpoints"
grep -q -- "--restart-from-scratch" "$work/out" || fail "the error does not say how to start over"
[[ $(stat -c %s "$ckpts/ckpt-80/model.safetensors") -eq 100 ]] || fail "a damaged checkpoint was overwritten"
train 40 --restart-from-scratch
[[ $rc -eq 0 ]] || fail "--restart-from-scratch ended $rc"
grep -q "restart-from-scratch: training from step 0" "$work/out" || fail "the fresh start was not said"
echo "PASS: a changed state.json is a damaged checkpoint; all damaged stops with exit 2 unless asked to start over"
