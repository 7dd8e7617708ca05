// Runs the tasks of one job generation to the end: starts each in its own
// process group, pumps their output into prefixed console lines and log
// files, and when a training task fails first, stops the others (SIGTERM,
// grace period, SIGKILL) and says who failed, how and with which last lines.
//
//   ConsoleWriter console(STDOUT_FILENO);
//   JobSupervisor supervisor(&console, {.grace_period = std::chrono::seconds(10)});
//   StatusOr<JobOutcome> outcome = supervisor.Run(tasks);   // blocks
//   // from a signal handler: supervisor.RequestStop(SIGINT);
//
// Rules (DESIGN.md, "Processes"; exit codes):
// - A training task that exits 0 early is not a failure; the job succeeds when
//   every training task exits 0 (the evaluator then runs to its own end).
// - The first training task to end badly (non-zero code or a signal not sent
//   by us) is the failure; the others are then stopped and their exits are
//   recorded as stopped_by_supervisor, unless they exited 0 (they had
//   finished: the report says so) or 3 (they saw the failure themselves).
// - An evaluator that fails does not stop training. It is started again,
//   alone, up to evaluator_restarts times (not after exit 2: bad usage);
//   past that it makes the job fail only if training succeeded.
// - RequestStop(sig) passes sig on to every task, waits the grace period, then
//   SIGKILLs what is left; the outcome's exit code is 128 + sig.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/process/child_process.h"
#include "launcher/process/console_writer.h"
// TaskResult, JobOutcome (and how the job's failure is chosen), and the
// failure report, still included from here.
#include "launcher/process/failure_report.h"
#include "launcher/process/job_outcome.h"

namespace mirrored {

struct TaskLaunch {
  std::string name;                // "worker:1": the console prefix and report name
  bool is_training = true;         // false for the evaluator
  std::vector<std::string> argv;
  std::vector<std::string> env;    // the task's whole environment
  std::string log_path = "";       // "" for no log file; appended to otherwise
  // A training task that writes signs of life to fd 3 (mirrored-worker:
  // SupervisorOptions::liveness_timeout); a user's program does not.
  bool reports_liveness = true;
  // Where the task writes its uncaught error as JSON (torch's @record, at
  // TORCHELASTIC_ERROR_FILE; "" none): removed before it starts, quoted in
  // the failure report when it fails.
  std::string error_file = "";
};

// SupervisorOptions' defaults; what each is for is said there.
inline constexpr std::chrono::seconds kDefaultGracePeriod{10};
inline constexpr std::chrono::minutes kDefaultEvaluatorStallTimeout{5};
inline constexpr std::chrono::seconds kDefaultPeerExitWait{5};
inline constexpr std::chrono::seconds kDefaultLivenessTimeout{30};

struct SupervisorOptions {
  // Between SIGTERM and SIGKILL when the job stops.
  std::chrono::milliseconds grace_period = kDefaultGracePeriod;
  size_t keep_last_lines = 20;
  // Once every training task has ended well, an evaluator that prints
  // nothing for this long is taken as hung (an evaluation prints a line per
  // checkpoint): it is stopped, and the job fails with its exit, instead of
  // the finished job staying open for ever.
  std::chrono::milliseconds evaluator_stall_timeout = kDefaultEvaluatorStallTimeout;
  // How many times an evaluator that fails by itself is started again, alone,
  // in one Run, after a pause of 1 s, 2 s, 4 s... up to 30 s (training goes
  // on undisturbed; the new one resumes after the
  // last checkpoint the evaluator lease records as evaluated). A restart
  // after every training task has exited 0 gets MIRRORED_TRAINING_ENDED=1:
  // the run directory's training-done record is this job's.
  int evaluator_restarts = 0;
  // When the first training task to fail exited 3 ("stopped because another
  // task failed"), the task it names is usually exiting with its own code a
  // moment later: the others are left this long to end by themselves before
  // they are stopped, so the report (and whether the job is restarted: exit
  // 2 never is) goes by the root cause, not by which exit was reaped first.
  std::chrono::milliseconds peer_exit_wait = kDefaultPeerExitWait;
  // A training task gets a pipe as its fd 3 (MIRRORED_LIVENESS_FD=3); a
  // mirrored worker writes a byte to it every heartbeat round once it has
  // joined, and "S" when it stops heartbeating (its exit barrier). A task
  // that wrote and then fell silent this long, still running, did not run
  // (stopped, hung): it is woken and stopped, and the report names it as
  // frozen. On a cluster host nothing else would end it: its peers on other
  // hosts only exit. A task that never writes is never judged.
  std::chrono::milliseconds liveness_timeout = kDefaultLivenessTimeout;
  // --hang-timeout (0: off): a training task that prints nothing and uses
  // (almost) no CPU time for this long is hung, whatever program it is (a
  // user's program reports no signs of life): it is stopped, the job fails
  // with exit 4 (a timeout), and the report says why. Almost none: under
  // kHungCpuShare of one core, what the idle threads of a runtime blocked
  // in a collective spend.
  std::chrono::milliseconds hang_timeout{0};
};

// SupervisorOptions::hang_timeout's "almost no CPU time": a share of one core.
inline constexpr double kHungCpuShare = 0.02;

class JobSupervisor {
 public:
  JobSupervisor(ConsoleWriter* console, SupervisorOptions options);
  ~JobSupervisor();
  JobSupervisor(const JobSupervisor&) = delete;
  JobSupervisor& operator=(const JobSupervisor&) = delete;

  // Starts every task and returns when all have ended. Errors: a task that
  // cannot be started (NotFound / PermissionDenied naming the binary and the
  // task; the tasks already started are stopped first), or Internal for a
  // failure of the supervisor's own plumbing (log file, poll).
  StatusOr<JobOutcome> Run(const std::vector<TaskLaunch>& tasks);

  // Asks the running job to stop with `sig`, sent by process `sender` (0:
  // the kernel, e.g. Ctrl-C). A second request kills every task at once,
  // unless it comes from the same process within a second as the first:
  // `timeout` signals the launcher and then its process group, a scheduler
  // may do the same. Async-signal-safe: it only writes to a pipe.
  void RequestStop(int sig, pid_t sender = 0);
  // Between runs (JobRunner's pause before a restart): waits up to
  // `timeout` for a stop request, and returns its signal.
  std::optional<int> WaitForStopRequest(std::chrono::milliseconds timeout);

 private:
  ConsoleWriter* console_;
  SupervisorOptions options_;
  int wake_pipe_[2] = {-1, -1};
};

}  // namespace mirrored
