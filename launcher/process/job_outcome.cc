#include "launcher/process/job_outcome.h"

#include "common/status.h"

namespace mirrored {

void JudgeOutcome(JobOutcome& outcome) {
  // The root cause is the earliest genuine training failure whose code is not
  // "stopped because another task failed" (3); a task that noticed the
  // failure through the coordination service can be reaped before the task
  // that actually died. A preemption (143) comes after any real failure: the
  // chief failing to write the preemption checkpoint must not be reported as
  // a clean preemption because the others' 143 came first.
  const TaskResult* root = nullptr;
  const TaskResult* first_preempted = nullptr;
  const TaskResult* first_peer_failed = nullptr;
  const TaskResult* evaluator_failure = nullptr;
  for (const auto& r : outcome.tasks) {
    if (r.exit.success() || r.stopped_by_supervisor) continue;
    if (!r.is_training) {
      if (!evaluator_failure) evaluator_failure = &r;
      continue;
    }
    const bool peer = r.exit.exit_code && *r.exit.exit_code == kExitPeerFailed;
    const bool preempted = r.exit.exit_code && *r.exit.exit_code == kExitPreempted;
    const TaskResult*& slot = peer ? first_peer_failed : preempted ? first_preempted : root;
    if (!slot || r.ended_at < slot->ended_at) slot = &r;
  }
  if (!root) root = first_preempted;
  if (!root) root = first_peer_failed;
  if (!root && !outcome.stop_signal) root = evaluator_failure;
  if (root) outcome.first_failure = *root;
  if (outcome.stop_signal) outcome.exit_code = 128 + *outcome.stop_signal;
  else if (root && root->hung) outcome.exit_code = kExitTimeout;  // it never ended by itself
  else if (root) outcome.exit_code = root->exit.ShellCode();
  else outcome.exit_code = 0;
}

}  // namespace mirrored
