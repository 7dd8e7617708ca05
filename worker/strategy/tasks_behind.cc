#include "worker/strategy/tasks_behind.h"

#include <chrono>
#include <cstdint>
#include <regex>
#include <sstream>

#include "common/seconds_text.h"

namespace mirrored {

Status WithTasksBehind(const Status& timeout, const StatusOr<coordination::rpc::ProgressResponse>& progress,
                       const std::string& task_name) {
  // Only a collective that itself timed out ("all-reduce #12 (...) failed
  // after ...", NCCL's too), not a local replica's wait for another local
  // replica, nor a wait of the program's own: #12 is the operation every
  // task must start, counted as the heartbeats count.
  static const std::regex kCollective(R"(^(?:NCCL )?(?:all-reduce|broadcast|barrier) #([0-9]+) )");
  std::smatch m;
  if (!progress.ok() || !std::regex_search(timeout.message(), m, kCollective) ||
      timeout.message().find("for local replicas [") != std::string::npos) {
    return timeout;
  }
  const uint64_t seq = std::stoull(m[1].str());
  auto ago = [](int64_t ms) { return SecondsText(std::chrono::milliseconds(ms)); };
  std::ostringstream behind;
  int count = 0;
  for (const auto& t : progress->tasks()) {
    if (t.task() == task_name || t.collectives() >= seq) continue;
    behind << (count++ ? ", " : "") << t.task();
    if (t.ms_since_heartbeat() < 0) {
      behind << " (no heartbeat yet)";
    } else {
      behind << " (at " << t.collectives() << " collectives, unchanged for " << ago(t.ms_since_progress())
             << "; last heartbeat " << ago(t.ms_since_heartbeat()) << " ago)";
    }
  }
  const std::string what =
      count == 0 ? " (as their heartbeats say, every task has started it: the tasks called different collectives "
                   "at this point (kind, size or root), a task stopped inside it, or the transport between them "
                   "failed)"
                 : " (never started by " + behind.str() +
                       ": alive, so busy or stuck in its own code, or waiting in another collective)";
  return Status(timeout.code(), timeout.message() + what);
}

}  // namespace mirrored
