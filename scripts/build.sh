#!/usr/bin/env bash
# Configures and builds everything into build/ (or $MIRRORED_BUILD_DIR).
#   scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${MIRRORED_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && [ ! -f "$build_dir/Makefile" ] && generator=(-G Ninja)
# ccache, where installed, makes rebuilds in other clones (worktrees, a
# fresh clone before a push) cheap; see docs/building.md.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# The commit-message check (CONTRIBUTING.md), in a git checkout that has
# no hooks of its own configured.
if [ -d .git ] || [ -f .git ]; then
  [ -n "$(git config core.hooksPath 2>/dev/null)" ] || git config core.hooksPath scripts/git-hooks
fi
cmake -S . -B "$build_dir" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "$@"
cmake --build "$build_dir" --parallel "$(nproc)"
