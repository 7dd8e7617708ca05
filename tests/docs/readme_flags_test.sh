#!/usr/bin/env bash
# The docs in step with the CLI: every long flag that `mirrored-launch
# local|cluster|explain|certs --help` and `mirrored-worker --help` list is
# documented in README.md or a docs/*.md page, and every flag in those
# pages' flag tables (rows that start with `--flag`) is one that a --help
# lists.
#
#   tests/docs/readme_flags_test.sh BIN_DIR README.md [PAGE.md ...]
#
# With README.md alone, the pages are README.md and the docs/*.md beside it.
set -euo pipefail
bin=$1
shift
pages=("$@")
if [[ ${#pages[@]} -eq 1 ]]; then
  shopt -s nullglob
  pages+=("$(dirname "$1")"/docs/*.md)
  shopt -u nullglob
fi
for page in "${pages[@]}"; do
  [[ -f $page ]] || { echo "FAIL: no such page: $page"; exit 1; }
done
fail=0

helps=$( {
  for sub in local cluster explain certs; do "$bin/mirrored-launch" "$sub" --help; done
  "$bin/mirrored-worker" --help
} 2>&1)
cli_flags=$(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$helps" | sort -u)
[[ $(wc -l <<<"$cli_flags") -ge 20 ]] || { echo "FAIL: too few flags parsed from --help:"; echo "$helps"; exit 1; }

for flag in $cli_flags; do
  case $flag in --help | --version) continue ;; esac
  if ! grep -qE -- "(^|[^a-z0-9-])${flag}([^a-z0-9-]|\$)" "${pages[@]}"; then
    echo "FAIL: $flag (in a --help) is documented in none of: ${pages[*]}"
    fail=1
  fi
done

# A flag table's row opens with the flag, optionally after a label:
# "| `--workers N` |" or "| evaluator: `--poll-interval SEC`, ... |".
table_rows=$(grep -HE '^\| ([a-z]+: )?`--' "${pages[@]}" || true)
[[ -n $table_rows ]] || { echo "FAIL: no flag tables found in ${pages[*]}"; exit 1; }
while IFS= read -r row; do
  page=${row%%:|*}
  for flag in $(cut -d'|' -f2 <<<"${row#*:}" | grep -oE -- '--[a-z][a-z0-9-]*'); do
    if ! grep -qxF -- "$flag" <<<"$cli_flags"; then
      echo "FAIL: $flag (in a flag table of $page) is in no --help"
      fail=1
    fi
  done
done <<<"$table_rows"

table_flags=$(cut -d: -f2- <<<"$table_rows" | cut -d'|' -f2 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
((fail == 0)) && echo "ok: $(wc -l <<<"$cli_flags") CLI flags documented in ${#pages[@]} page(s); $(wc -l <<<"$table_flags") table flags exist"
exit "$fail"
