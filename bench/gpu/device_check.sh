#!/usr/bin/env bash
# The whole GPU check in one device call, bounded to MIRRORED_CHECK_SECONDS
# (420 s) of wall time; about 5 minutes expected on an H100 or H200:
#   tests       the gpu tests (each of the three binaries bounded to 60 s)
#   b256        batch 256: mlp cnn resnet x --precision fp32 tf32 bf16 fp16
#   b64         batch 64: cnn resnet x fp32 bf16
#   resnet64x3  resnet, batch 64, fp32, three times in a row (its ratio to
#               PyTorch fell from 1.95x to 1.22x between two checks)
#   layout      cudnn_layout_bench --batch 256, when 30 s are left
# Each stage runs under timeout: its own cap, never past the budget, and
# tests, b256 and b64 leave 60 s for resnet64x3. Each program run inside a
# table is bounded to 60 s (MIRRORED_GPU_RUN_TIMEOUT). Needs the archive
# that bench/gpu/pack.sh makes:
#
#   bench/gpu/pack.sh build /tmp/gpu-pack --archive .carry/gpu.tar.xz    # here
#   bash bench/gpu/device_check.sh                                       # device: carry .carry/gpu.tar.xz, timeout_s 480
#
# $OUT gets 7 files (the device tool brings back 8 at most, none in folders):
#   check.txt           this script's lines: the GPU, each stage's limit, seconds and exit
#   STAGE.txt           each stage's tables (its stdout): tests, b256, b64, resnet64x3, layout
#   logs.tar.gz         each stage's stderr (STAGE.stderr) and logs (STAGE/: test binaries,
#                       worker and torch runs); rewritten after every stage, so a call cut
#                       off at its timeout still brings back what had run
set -u
archive=${1:-.carry/gpu.tar.xz}
out=${OUT:-$(mktemp -d)}
budget_s=${MIRRORED_CHECK_SECONDS:-500}
repeat_reserve_s=60  # what tests, b256 and b64 leave for resnet64x3
pack=/tmp/gpu-pack
here=$(cd "$(dirname "$0")/../.." && pwd)
logs=$(mktemp -d)
train=$here/bench/training/gpu_train.sh
export MIRRORED_GPU_TEST_TIMEOUT=${MIRRORED_GPU_TEST_TIMEOUT:-120} MIRRORED_GPU_RUN_TIMEOUT=${MIRRORED_GPU_RUN_TIMEOUT:-60}
status=0

say() { echo "$*" | tee -a "$out/check.txt"; }
seconds_left() { echo $((budget_s - SECONDS)); }
save_logs() {
  tar -C "$logs" -czf "$logs.tar.gz" . && mv -f "$logs.tar.gz" "$out/logs.tar.gz"
}

# stage NAME CAP_S RESERVE_S COMMAND...: runs COMMAND under timeout for
# CAP_S, or for what the budget has left less RESERVE_S when that is less;
# skipped (a failure) under 20 s. Its stdout goes to $out/NAME.txt and is
# printed; its stderr to the logs, of which the first lines are printed.
stage() {
  local name=$1 cap_s=$2 reserve_s=$3 limit_s rc began
  shift 3
  limit_s=$(( $(seconds_left) - reserve_s ))
  [ "$cap_s" -lt "$limit_s" ] && limit_s=$cap_s
  if [ "$limit_s" -lt 20 ]; then
    say "=== $name: skipped, ${limit_s} s left for it at ${SECONDS} s"
    status=1
    return
  fi
  say "=== $name (limit ${limit_s} s; ${SECONDS} s so far)"
  began=$SECONDS
  MIRRORED_GPU_LOG_DIR=$logs/$name timeout -k 10 "$limit_s" "$@" > "$out/$name.txt" 2> "$logs/$name.stderr"
  rc=$?
  [ "$rc" = 124 ] && echo "# stopped at its ${limit_s} s limit" >> "$out/$name.txt"
  [ "$rc" = 0 ] || status=1
  cat "$out/$name.txt"
  if [ -s "$logs/$name.stderr" ]; then
    echo "# stderr: $(wc -l < "$logs/$name.stderr") lines (logs.tar.gz: $name.stderr), the first 12:"
    head -12 "$logs/$name.stderr" | sed 's/^/#   /'
  fi
  say "=== $name: exit $rc after $((SECONDS - began)) s"
  save_logs
}

: > "$out/check.txt"
say "# mirrored device check, $(date -u +%FT%TZ); budget ${budget_s} s"
timeout 90 tar -C /tmp -xJf "$archive" || { say "device_check.sh: cannot unpack $archive"; exit 2; }
say "# $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1); unpacked at ${SECONDS} s"

# A test binary's timeout puts it in a process group of its own, which the
# stage's timeout does not reach: 3 x 60 s fit the stage's 190.
stage tests 250 $((repeat_reserve_s + 150)) "$pack/run" "$train" "$pack" --no-table
stage b256 270 "$repeat_reserve_s" "$pack/run" "$train" "$pack" --no-tests --batch 256 \
  --models "mlp cnn resnet" --precisions "fp32 tf32 bf16 fp16"
stage b64 100 "$repeat_reserve_s" "$pack/run" "$train" "$pack" --no-tests --batch 64 \
  --models "cnn resnet" --precisions "fp32 bf16"
stage resnet64x3 90 0 "$pack/run" "$train" "$pack" --no-tests --batch 64 --models resnet --precisions fp32 --repeat 3
# The three runs side by side with the figures that raised the question.
[ -f "$out/resnet64x3.txt" ] && awk '$1 == "resnet" && $2 == 64 && $3 == "fp32" { r = r " " $7; ms = ms " " $5 }
     END { if (r != "") printf "# resnet b64 fp32: ratio%s, mirrored ms/step%s (earlier H200 checks: 1.95 1.95 1.22; 2.40 2.55 3.27)\n", r, ms }' \
  "$out/resnet64x3.txt" | tee -a "$out/check.txt"
if [ "$(seconds_left)" -ge 30 ]; then
  stage layout 45 0 "$pack/run" "$pack/bin/cudnn_layout_bench" --batch 256
else
  say "=== layout: skipped, $(seconds_left) s left"
fi
say "# done in ${SECONDS} s, exit $status"
exit $status
