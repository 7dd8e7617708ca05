// Which of the local replicas' results MirroredStrategy::RunReplicas
// returns: a configuration error found here (InvalidArgument: every task
// finds it alike, so a peer's echo must not hide it), else the job error (a
// peer failed: it explains everything else), else the root cause over the
// Aborted echoes it caused locally, else any error, else OK. Pure.
//
//   std::vector<Status> results = ...;          // one per local replica
//   return RunReplicasResult(results, job_error());
#pragma once

#include <vector>

#include "common/status.h"

namespace mirrored {

Status RunReplicasResult(const std::vector<Status>& results, const Status& job_error);

}  // namespace mirrored
