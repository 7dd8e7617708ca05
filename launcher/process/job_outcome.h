// What one job generation's tasks ended with (TaskResult, JobOutcome), and
// which of their failures is the job's: JudgeOutcome picks the root cause
// and the launcher's exit code from the tasks' exits alone. Pure: the
// supervisor records the results, JudgeOutcome rules on them.
//
//   JobOutcome outcome;
//   outcome.tasks = {chief_result, worker_result};   // in launch order
//   JudgeOutcome(outcome);                            // sets first_failure, exit_code
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/process/child_process.h"

namespace mirrored {

struct TaskResult {
  std::string name;
  bool is_training = true;
  ProcessExit exit;
  std::chrono::system_clock::time_point ended_at;
  bool stopped_by_supervisor = false;   // ended because we signalled it (not: an exit 0, its own failure)
  std::optional<int> signal_sent;       // the first signal we sent it, if any (its exit may be its own)
  int restarts = 0;                     // times it was started again alone (an evaluator)
  std::vector<std::string> last_lines;  // the last lines of its output
  std::string error_file;               // where its own error message is (TaskLaunch::error_file), if any
  std::optional<std::string> error_message;  // what it wrote there when it failed
  std::optional<std::string> hung;      // why the launcher stopped it as hung (--hang-timeout)
};

struct JobOutcome {
  int exit_code = 0;                        // what the launcher should exit with
  std::optional<TaskResult> first_failure;  // the task that failed first, if any
  std::optional<int> stop_signal;           // set when RequestStop ended the job
  std::vector<TaskResult> tasks;            // every task, in launch order
  bool success() const { return exit_code == 0; }
};

// Sets outcome.first_failure and outcome.exit_code from outcome.tasks and
// outcome.stop_signal. The root cause is the earliest (by ended_at) training
// task that failed by itself with a code other than 3 (stopped because
// another task failed) or 143 (preempted); else the earliest 143; else the
// earliest 3; else, unless a stop request ended the job, the first failed
// evaluator. Tasks that succeeded or were stopped by the supervisor never
// count. exit_code: 128 + the stop signal, else the root cause's shell code,
// else 0.
void JudgeOutcome(JobOutcome& outcome);

}  // namespace mirrored
