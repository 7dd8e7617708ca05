// The launcher's word on a failed job: the human-readable report (which
// task failed first, how, when, and its last lines), and, for a task that
// exited 3, the task its last lines blame. Pure: from a JobOutcome.
//
//   StatusOr<JobOutcome> outcome = supervisor.Run(tasks);
//   std::cerr << FormatFailureReport(*outcome);   // "==== job failed ====\nfirst failure: task worker:1 ..."
//   if (auto blamed = BlamedBy(*outcome->first_failure)) { ... blamed->task ... }
#pragma once

#include <optional>
#include <string>

#include "launcher/process/job_outcome.h"

namespace mirrored {

// The human-readable failure report: which task failed first, how, when, and
// its last lines. Empty when the job succeeded.
std::string FormatFailureReport(const JobOutcome& outcome);

// For a task that exited 3 ("stopped because another task failed"): the
// task its last lines name, and whether that task's own error, as the
// coordination service relayed it ("task worker:1 failed at ...: exited with
// error: NOT_FOUND: ..."), was bad usage or configuration (exit code 2 there:
// no restart fixes it). nullopt when no other task is named.
struct BlamedTask {
  std::string task;
  bool configuration_error = false;
  bool interrupted = false;  // a SIGINT on its host ended it (kInterruptedOnItsHost)
};
std::optional<BlamedTask> BlamedBy(const TaskResult& result);

// The error a task wrote to its error file (TaskLaunch::error_file) in the
// format of torch's @record: {"message": {"message": "RuntimeError: ...",
// "extraInfo": {...}}} (or "message" a string): that message, at most a few
// lines. nullopt when the file is missing, empty or not that.
std::optional<std::string> ErrorFileMessage(const std::string& path);

}  // namespace mirrored
