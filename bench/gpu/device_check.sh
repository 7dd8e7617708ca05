#!/usr/bin/env bash
# The whole GPU check in one device call (about 2 minutes on an H200): the
# gpu tests and the batch-256 throughput table, cuDNN's layout table, then
# the batch-64 table. Outputs and logs go to $OUT (the device tool brings
# them back). Needs the archive that bench/gpu/pack.sh makes:
#
#   bench/gpu/pack.sh build /tmp/gpu-pack --archive .carry/gpu.tar.xz        # here
#   bash bench/gpu/device_check.sh                                           # device, carry .carry/gpu.tar.xz
set -u
archive=${1:-.carry/gpu.tar.xz}
out=${OUT:-$(mktemp -d)}
tar -C /tmp -xJf "$archive" || { echo "device_check.sh: cannot unpack $archive" >&2; exit 2; }
pack=/tmp/gpu-pack
here=$(cd "$(dirname "$0")/../.." && pwd)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
status=0
echo "=== gpu tests, batch 256"
MIRRORED_GPU_LOG_DIR=$out/logs256 timeout 300 "$pack/run" "$here/bench/training/gpu_train.sh" "$pack" \
  > "$out/b256.txt" 2>&1 || status=1
tail -25 "$out/b256.txt"
echo "=== cudnn_layout_bench"
timeout 90 "$pack/run" "$pack/bin/cudnn_layout_bench" --batch 256 > "$out/layout.txt" 2>&1 || status=1
tail -12 "$out/layout.txt"
echo "=== batch 64"
MIRRORED_GPU_LOG_DIR=$out/logs64 timeout 150 "$pack/run" "$here/bench/training/gpu_train.sh" "$pack" --no-tests \
  --batch 64 > "$out/b64.txt" 2>&1 || status=1
tail -12 "$out/b64.txt"
exit $status
