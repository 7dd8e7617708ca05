#!/bin/sh
# A stand-in for mirrored-worker in the launcher's integration tests: it
# behaves as --mode says, so the tests exercise supervision alone.
#   --mode ok              print the task and exit 0
#   --mode hang            record the pid and sleep until stopped
#   --mode deaf            record the pid and ignore SIGINT/SIGTERM (only SIGKILL ends it)
#   --mode kill-task1      task 1 dies by SIGKILL, the others hang
#   --mode fail-gen0-task1 task 1 exits 1 in generation 0; all succeed after
#   --mode fail-gen0       every task exits 1 in generation 0; all succeed after
mode=ok
run_dir=
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode=$2; shift 2 ;;
    --run-dir) run_dir=$2; shift 2 ;;
    *) shift ;;
  esac
done
type=$(printf '%s' "$TF_CONFIG" | sed -n 's/.*"type":"\([a-z]*\)".*/\1/p')
index=$(printf '%s' "$TF_CONFIG" | sed -n 's/.*"index":\([0-9]*\).*/\1/p')
task="$type:$index"
echo "task $task generation $MIRRORED_GENERATION token ${#MIRRORED_JOB_TOKEN} chars"
# deaf: deaf before the pid file tells the test it runs.
[ "$mode" = deaf ] && trap '' INT TERM
[ -n "$run_dir" ] && printf '%s' "$MIRRORED_JOB_TOKEN" > "$run_dir/token.$task"
[ -n "$run_dir" ] && echo $$ > "$run_dir/.pid.$task" && mv "$run_dir/.pid.$task" "$run_dir/pid.$task"
case "$mode" in
  ok) exit 0 ;;
  hang) exec sleep 60 ;;
  deaf) exec sleep 60 ;;
  kill-task1)
    if [ "$task" = worker:1 ]; then
      # Die only once the other tasks run (bounded wait on their pid files).
      for _ in $(seq 200); do
        [ -f "$run_dir/pid.worker:0" ] && [ -f "$run_dir/pid.worker:2" ] && break
        sleep 0.05
      done
      echo "step 42: about to die"; kill -9 $$
    fi
    exec sleep 60 ;;
  fail-gen0)
    if [ "$MIRRORED_GENERATION" = 0 ]; then echo "failing in generation 0"; exit 1; fi
    exit 0 ;;
  fail-gen0-task1)
    if [ "$task" = worker:1 ] && [ "$MIRRORED_GENERATION" = 0 ]; then echo "failing in generation 0"; exit 1; fi
    exit 0 ;;
esac
echo "unknown mode $mode" >&2
exit 2
