// A collective's timeout explained: which tasks, as the coordination
// service last heard from their heartbeats, never started the collective
// that timed out (busy or stuck in their own code, or in another one).
//
//   Status s = WithTasksBehind(DeadlineExceededError("all-reduce #12 (...) failed after 300 s"),
//                              agent.Progress(), "worker:0");
//   // "... (never started by worker:1 (at 11 collectives, unchanged for 290 s; ...))"
#pragma once

#include <string>

#include "common/status.h"
#include "proto/coordination.pb.h"

namespace mirrored {

// `timeout`, when a collective's own DeadlineExceeded, with the tasks that,
// as the coordination service last heard (`progress`), never started it;
// any other status unchanged. `task_name` (this task) is left out.
Status WithTasksBehind(const Status& timeout, const StatusOr<coordination::rpc::ProgressResponse>& progress,
                       const std::string& task_name);

}  // namespace mirrored
