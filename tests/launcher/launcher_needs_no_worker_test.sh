#!/usr/bin/env bash
# mirrored-launch builds on nothing from worker/: no file under launcher/
# or common/ (which both programs build on) includes a worker/ header, and
# no CMakeLists there links a library that worker/ defines. What both
# programs need goes to common/ (the run directory's files: common/run_dir/).
#
#   tests/launcher/launcher_needs_no_worker_test.sh SOURCE_DIR
set -euo pipefail
cd "${1:?usage: $0 SOURCE_DIR}"
failed=0

if includes=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]worker/' launcher common); then
  echo "launcher/ and common/ include worker/ headers (move what both need to common/):"
  echo "$includes"
  failed=1
fi

# Every library worker/ defines (not its aliases), by name.
libraries=$(grep -rhoE 'add_library\([[:space:]]*[A-Za-z0-9_]+([[:space:]]|$)' --include=CMakeLists.txt worker |
  sed -E 's/add_library\([[:space:]]*//; s/[[:space:]]+$//' | sort -u)
if [[ -z $libraries ]]; then
  echo "found no add_library() under worker/: this check no longer knows what to look for"
  exit 1
fi
for library in $libraries; do
  # Comments may name them; code may not.
  if links=$(grep -rnw --include=CMakeLists.txt "$library" launcher common | grep -vE '^[^:]+:[0-9]+:[[:space:]]*#'); then
    echo "launcher/ or common/ links $library, a library of worker/:"
    echo "$links"
    failed=1
  fi
done

if [[ $failed -eq 0 ]]; then
  echo "launcher/ and common/: no worker/ header included, none of the $(wc -w <<<"$libraries") worker/ libraries linked"
fi
exit $failed
