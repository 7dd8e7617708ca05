#include "worker/strategy/replicas_result.h"

namespace mirrored {

Status RunReplicasResult(const std::vector<Status>& results, const Status& job_error) {
  // A configuration error this task found itself (the replicas diverged
  // under --lr, tasks disagree on a flag) is reached by every task alike: a
  // peer's report of the same error arriving first must not turn it into
  // "stopped because another task failed".
  for (const Status& s : results)
    if (s.code() == StatusCode::kInvalidArgument) return s;
  // The job error (a peer failed) explains everything else.
  if (!job_error.ok()) return job_error;
  // Prefer the root cause over the Aborted echoes it caused locally.
  for (const Status& s : results)
    if (!s.ok() && s.code() != StatusCode::kAborted) return s;
  for (const Status& s : results)
    if (!s.ok()) return s;
  return OkStatus();
}

}  // namespace mirrored
