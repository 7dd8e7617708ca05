#!/usr/bin/env bash
# README command (2): installs what is missing, builds, runs the whole suite.
#   scripts/test.sh [ctest options, e.g. -L unit or -R Tfconfig]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
build_dir=${MIRRORED_BUILD_DIR:-build}
# A CPU that Linux says has bf16 instructions must run the cpu-bf16 tests,
# not skip them (a broken detection would otherwise pass as "skipped").
if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then
  export MIRRORED_REQUIRE_CPU_BF16=${MIRRORED_REQUIRE_CPU_BF16:-1}
fi
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 300 "$@"
