#!/usr/bin/env bash
# README.md in step with the CLI: every long flag that `mirrored-launch
# local|cluster|explain --help` and `mirrored-worker --help` list is
# documented in README.md, and every flag in README's flag tables (rows that
# start with `--flag`) is one that a --help lists.
#
#   tests/docs/readme_flags_test.sh BIN_DIR README.md
set -euo pipefail
bin=$1
readme=$2
fail=0

helps=$( {
  for sub in local cluster explain; do "$bin/mirrored-launch" "$sub" --help; done
  "$bin/mirrored-worker" --help
} 2>&1)
cli_flags=$(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$helps" | sort -u)
[[ $(wc -l <<<"$cli_flags") -ge 20 ]] || { echo "FAIL: too few flags parsed from --help:"; echo "$helps"; exit 1; }

for flag in $cli_flags; do
  case $flag in --help | --version) continue ;; esac
  if ! grep -qE -- "(^|[^a-z0-9-])${flag}([^a-z0-9-]|\$)" "$readme"; then
    echo "FAIL: $flag (in a --help) is not documented in $readme"
    fail=1
  fi
done

table_flags=$(grep -E '^\| ([a-z]+: )?`--' "$readme" | cut -d'|' -f2 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
[[ -n $table_flags ]] || { echo "FAIL: no flag tables found in $readme"; exit 1; }
for flag in $table_flags; do
  if ! grep -qxF -- "$flag" <<<"$cli_flags"; then
    echo "FAIL: $flag (in a flag table of $readme) is in no --help"
    fail=1
  fi
done

((fail == 0)) && echo "ok: $(wc -l <<<"$cli_flags") CLI flags documented; $(wc -l <<<"$table_flags") table flags exist"
exit "$fail"
