// TaskClaim: a process registering as a task, judged against the process
// already registered as it — the same process again, a restart, a second
// process given the same task (refused, or first told to wait for the other
// to end), or, before the job forms, a replacement. A pure function of the
// task's state, the claim and the time; CoordinationService acts on it.
//
//   const ClaimVerdict v = JudgeTaskClaim(claimed, {.incarnation = inc, .host = "10.0.0.2"}, rules, now_ms);
//   if (v.kind == ClaimVerdict::Kind::kWait) remember(v.first_told_to_wait_ms), answer(v.answer);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "worker/coordination/task_state.h"

namespace mirrored::coordination {

// In the message of Register's Unavailable answer to a second process of a
// running task from its own host: the agent registers again until the
// earlier process ends or the service refuses the claim for good.
inline constexpr std::string_view kPreviousProcessStillRunning = "its previous process is still running";

// At most this many second processes wait for one task at a time; more are
// refused at once (the task's host is starting it over and over).
inline constexpr size_t kMaxWaitingClaims = 16;

// The task as the service knows it.
struct ClaimedTask {
  std::string name = {};  // "worker:0"
  TaskState state = TaskState::kUnregistered;
  uint64_t incarnation = 0;     // of the process registered as it
  std::string host = {};       // that process's (gRPC peer's host), "" when unknown
  bool host_listed = false;     // the cluster lists the task at `host`, an IP
  int64_t last_heartbeat_ms = 0;
  bool polling = false;         // that process holds its error poll open
  size_t waiting_claims = 0;    // other processes told to wait for it to end
};

// The process claiming it.
struct TaskClaim {
  uint64_t incarnation = 0;
  std::string host = {};      // "" when unknown
  bool host_listed = false;   // the cluster lists the task at `host`, an IP
  bool restarted = false;     // started again by its launcher: the task's earlier process has ended
  // When it was first told to wait for the task's process to end, if it was.
  std::optional<int64_t> told_to_wait_ms = {};
};

struct ClaimRules {
  bool job_formed = false;  // every task registered: heartbeats count
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(5);
};

struct ClaimVerdict {
  enum class Kind {
    kRegister,     // before the job forms: the claimant takes the task (first claim, or the same process again)
    kReplace,      // before the job forms: the claimant replaces the registered process
    kSameProcess,  // the job formed: the registered process registering again (answer the view)
    kWait,         // a second process of the task's host: `answer` (Unavailable) until the other one ends
    kRefuse,       // a second process, refused alone: `answer` (InvalidArgument)
    kRestart,      // the task restarted: it fails, saying `failure`
  };
  Kind kind = Kind::kRegister;
  Status answer = {};                 // kWait, kRefuse
  std::string failure = {};           // kRestart
  int64_t first_told_to_wait_ms = 0;  // kWait: when this claimant's wait began
};

ClaimVerdict JudgeTaskClaim(const ClaimedTask& task, const TaskClaim& claim, const ClaimRules& rules, int64_t now_ms);

// A process claiming `task` (from `host`) after the job that ran it ended,
// `how`; `waited`: it had been told to wait for the task's process. Not a
// launcher's restart: no service of that job will take it, nor will a
// restart by its own launcher find one (InvalidArgument: exit 2, not
// retried).
Status ClaimOnAnEndedJob(const std::string& task, const std::string& how, const std::string& host, bool waited);

}  // namespace mirrored::coordination
