// RunningTask: what RunningJob keeps about one task while the job
// runs (its process, its output pipe and tee, its liveness pipe, the
// signals sent to it, an evaluator's pending restart, its result), and the
// pieces of the run that work on one task alone (its output, its signs of
// life, an evaluator's restart). Internal to JobSupervisor.
//
//   RunningTask t;
//   t.launch = &launch; t.out_fd = child->TakeOutputFd(); ...
//   PumpOutput(t);                                     // on POLLIN: lines to the console and log
//   bool ours = EndedBecauseStopped(t, *t.child->Poll());
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "launcher/process/child_process.h"
#include "launcher/process/console_writer.h"
#include "launcher/process/job_supervisor.h"
#include "launcher/process/line_tee.h"

namespace mirrored {

struct RunningTask {
  const TaskLaunch* launch = nullptr;
  std::optional<ChildProcess> child;
  std::unique_ptr<LineTee> tee;
  int log_fd = -1;
  int out_fd = -1;  // owned once taken from the child; -1 at EOF
  std::optional<int> signal_sent;  // the first signal we sent it
  bool killed = false;              // we sent SIGKILL after the grace period
  bool stalled = false;             // stopped as hung: an evaluator silent after training, a frozen task
  int liveness_fd = -1;             // read end of its fd 3 (training tasks); -1 at EOF
  bool liveness_armed = false;      // it wrote a sign of life, and not "S" since
  std::chrono::steady_clock::time_point last_alive = std::chrono::steady_clock::now();
  int restarts = 0;                 // an evaluator's restarts alone
  std::optional<std::chrono::steady_clock::time_point> restart_at;  // it failed: started again then
  std::optional<ProcessExit> failed_exit;                            // ... after this exit
  std::chrono::steady_clock::time_point last_output = std::chrono::steady_clock::now();
  std::optional<TaskResult> result;
  // --hang-timeout: its process group's CPU ticks at the last sample (unset
  // before the first), and when it last used more than kHungCpuShare.
  std::optional<int64_t> cpu_ticks;
  std::chrono::steady_clock::time_point last_busy = std::chrono::steady_clock::now();
  std::optional<std::string> hung;  // why it was stopped as hung
};

// Did this task end because we stopped it, rather than failing by itself?
// A task told to stop may answer with the signal, with 128 + signal, or with
// exit code 3 (it saw the job abort). Exit 0 is not one: a task exits 0 only
// once its work is done (a worker after the exit barrier, an evaluator after
// the final checkpoint), so a 0 reaped after our SIGTERM was ending anyway
// (seen: a chief SIGKILLed by hand after the exit barrier, and its peer's 0
// reported as "stopped by the launcher").
bool EndedBecauseStopped(const RunningTask& t, const ProcessExit& e);

// Closes `fd` if open, and sets it to -1.
void CloseFd(int& fd);

// Passes on what the task's (non-blocking) pipe holds now; at EOF or an
// error, ends its last line and closes the pipe.
void PumpOutput(RunningTask& t);

// Takes in the signs of life its (non-blocking) liveness pipe holds now:
// each read marks it alive; it stays armed (judged for liveness) unless the
// last byte read was "S" (it stopped heartbeating). Closes the pipe at EOF
// (it exited, or closed it).
void ReadLiveness(RunningTask& t);

// Starts an evaluator that failed by itself again, alone, after its pause:
// a dated line in its log, MIRRORED_TRAINING_ENDED=1 in its environment
// when `training_ended` (every training task exited 0). False when it
// cannot be started (said on `console` unless null); its failure then
// stands.
bool StartAgain(RunningTask& t, bool training_ended, ConsoleWriter* console);

}  // namespace mirrored
