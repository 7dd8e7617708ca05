#include "worker/coordination/task_claim.h"

#include <algorithm>

namespace mirrored::coordination {
namespace {

// Two processes given the same task: the newcomer, from `host`, is refused
// (InvalidArgument: exit 2); `holder` says why the first one is the task.
Status SecondClaimRefused(const std::string& task, const std::string& holder, const std::string& host,
                          bool same_host = false) {
  const std::string advice = same_host ? "stop the other process running it on " + host +
                                             ", another launcher's or job's, or check TF_CONFIG's \"task\" there"
                                       : "check TF_CONFIG's \"task\" on " + host;
  return InvalidArgumentError("task " + task + " is " + holder + "; this second process claiming it, from " + host +
                              ", is refused: every process of a job needs its own task (" + advice + ")");
}

ClaimVerdict Refuse(Status answer) { return {.kind = ClaimVerdict::Kind::kRefuse, .answer = std::move(answer)}; }

// Before the job forms there are no heartbeats to tell a live duplicate
// from a restart; but where the cluster lists the task's IP, the process
// registered from it is the task, and one from elsewhere is another host
// given the same task.
ClaimVerdict JudgeBeforeTheJobForms(const ClaimedTask& task, const TaskClaim& claim) {
  const bool another_process = task.state == TaskState::kConnected && task.incarnation != claim.incarnation;
  if (another_process && !claim.host.empty() && task.host_listed && !claim.host_listed) {
    return Refuse(
        SecondClaimRefused(task.name, "already registered from " + task.host + ", its address in the cluster",
                           claim.host));
  }
  // Restarted before rendezvous finished: the new process replaces the old.
  // (Where the cluster gives a name, not an IP, a live duplicate cannot be
  // told from a restart: the replaced one names the newcomer's host, for
  // two hosts given the same task.)
  return {.kind = another_process ? ClaimVerdict::Kind::kReplace : ClaimVerdict::Kind::kRegister};
}

// Another process of the task's host, not started again by a launcher,
// while the task's process runs: that one may be stopping (a Ctrl-C and an
// immediate re-run), so the newcomer waits out one heartbeat timeout from
// its first answer before it is taken for a second process given the same
// task.
ClaimVerdict JudgeWaitingClaim(const ClaimedTask& task, const TaskClaim& claim, const ClaimRules& rules,
                               int64_t now_ms, const std::string& from) {
  if (!claim.told_to_wait_ms && task.waiting_claims >= kMaxWaitingClaims) {
    return Refuse(SecondClaimRefused(task.name,
                                     "still running on " + from + ", and " + std::to_string(kMaxWaitingClaims) +
                                         " other processes claiming it already wait for it to end",
                                     from, /*same_host=*/true));
  }
  const int64_t first_told_ms = claim.told_to_wait_ms.value_or(now_ms);
  const int64_t waited_ms = now_ms - first_told_ms;
  if (waited_ms >= rules.heartbeat_timeout.count()) {
    return Refuse(SecondClaimRefused(task.name,
                                     "still running: its process on " + from +
                                         " kept heartbeating and stayed connected for the " +
                                         std::to_string(waited_ms) + " ms this second process waited",
                                     from, /*same_host=*/true));
  }
  return {.kind = ClaimVerdict::Kind::kWait,
          .answer = UnavailableError("task " + task.name + ": " + std::string(kPreviousProcessStillRunning) + " (on " +
                                     from + ", last heartbeat " + std::to_string(now_ms - task.last_heartbeat_ms) +
                                     " ms ago, still connected); this new process waits up to " +
                                     std::to_string(rules.heartbeat_timeout.count()) +
                                     " ms for it to end before it is refused as a second process given the same task"),
          .first_told_to_wait_ms = first_told_ms};
}

}  // namespace

ClaimVerdict JudgeTaskClaim(const ClaimedTask& task, const TaskClaim& claim, const ClaimRules& rules,
                            int64_t now_ms) {
  if (!rules.job_formed) return JudgeBeforeTheJobForms(task, claim);
  if (task.incarnation == claim.incarnation) return {.kind = ClaimVerdict::Kind::kSameProcess};
  const std::string from = claim.host.empty() ? "?" : claim.host;
  if (!claim.restarted && (task.state == TaskState::kShuttingDown || task.state == TaskState::kShutdown)) {
    // The task's process is in the exit barrier, or past it: the job is
    // ending cleanly (it finished, or stopped after a step on SIGTERM). A
    // process that no launcher restarted has no part in it, and taken for a
    // restart it would fail the job in its exit barrier.
    return Refuse(ClaimOnAnEndedJob(task.name,
                                    "its process on " + (task.host.empty() ? "?" : task.host) +
                                        " reached the exit barrier (the job finished, or stopped on a signal)",
                                    from, claim.told_to_wait_ms.has_value()));
  }
  // Alive by every sign (a heartbeat within the last 2 s, the usual
  // interval being 1 s) and on another host than this claimant: not a
  // restart (whose old process is dead) but two processes given the same
  // task. Only the newcomer is refused; the job goes on.
  const int64_t since_heartbeat_ms = now_ms - task.last_heartbeat_ms;
  const bool alive = task.state == TaskState::kConnected &&
                     since_heartbeat_ms < std::min<int64_t>(2000, rules.heartbeat_timeout.count());
  const bool other_host = !task.host.empty() && !claim.host.empty() && task.host != claim.host;
  if (alive && other_host) {
    return Refuse(SecondClaimRefused(task.name,
                                     "already running, registered from " + task.host + " (its last heartbeat " +
                                         std::to_string(since_heartbeat_ms) + " ms ago)",
                                     from));
  }
  // From the same host, a fast restart looks the same, unless the claimant
  // says it is none (no launcher restarted it) while the old process still
  // holds its error poll open (its connection is up: a process that died
  // had it cancelled at once).
  if (alive && !other_host && !claim.restarted && task.polling) {
    return JudgeWaitingClaim(task, claim, rules, now_ms, from);
  }
  return {.kind = ClaimVerdict::Kind::kRestart,
          .failure = "restarted with a new incarnation " + std::to_string(claim.incarnation) + " (was " +
                     std::to_string(task.incarnation) + "); the job must restart from its last checkpoint"};
}

Status ClaimOnAnEndedJob(const std::string& task, const std::string& how, const std::string& host, bool waited) {
  return InvalidArgumentError("task " + task + ": the job that ran it has ended: " + how +
                              (waited ? ", while this second process waited for the task's process to end" : "") +
                              "; this process claiming it, from " + host +
                              ", has no job to join (run the job again, every task of it, to go on)");
}

}  // namespace mirrored::coordination
