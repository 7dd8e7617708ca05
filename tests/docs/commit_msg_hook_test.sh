#!/usr/bin/env bash
# scripts/git-hooks/commit-msg: subjects of 72 characters pass, 73 do not;
# the second line must be blank; git's comment lines are not the message.
#   tests/docs/commit_msg_hook_test.sh SOURCE_DIR
set -euo pipefail
hook=$1/scripts/git-hooks/commit-msg
msg=$(mktemp)
trap 'rm -f "$msg"' EXIT
check() {  # expected-exit text
  printf '%b' "$2" >"$msg"
  rc=0
  "$hook" "$msg" 2>/dev/null || rc=$?
  [[ $rc -eq $1 ]] || { echo "FAIL: exit $rc, expected $1, for: $2"; exit 1; }
}
s72=$(printf 'x%.0s' $(seq 72))
check 0 "$s72\n\nWhy it changed.\n"
check 1 "${s72}y\n\nWhy it changed.\n"
check 1 "Subject\nno blank line\n"
check 0 "Subject only\n"
check 0 "# Please enter the commit message\nShort subject\n\nBody.\n"
check 0 "Ünïcödé counts characters, not bytes: $(printf 'é%.0s' $(seq 30))\n"
echo "PASS: commit-msg hook"
