// What `local` and `cluster` share once their tasks are planned: run the job
// generation after generation under a JobSupervisor, with SIGINT/SIGTERM
// passed on to every task, and return the launcher's exit code.
//
//   SupervisedRunOptions o{.run_dir = "runs/x", .max_restarts = 1};
//   return RunSupervised(o, [&](int gen) { return plan.Tasks(gen, env); });
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/run_dir/run_dir_lock.h"
#include "common/status.h"
#include "launcher/job/job_runner.h"

namespace mirrored {

// --grace-period's range (seconds between SIGTERM and SIGKILL).
inline constexpr std::chrono::hours kMaxGracePeriod{24};
// --hang-timeout's range (seconds; 0 is off).
inline constexpr std::chrono::hours kMaxHangTimeout{24 * 7};

struct SupervisedRunOptions {
  std::string run_dir;                 // logs go to RUN_DIR/logs/<task>.log
  int max_restarts = 0;
  std::chrono::milliseconds grace_period = kDefaultGracePeriod;
  // The launcher's own lines (its reports) also go to RUN_DIR/logs/<this>
  // ("" none): "launcher.log" for `local`, "launcher-<task>.log" for
  // `cluster`, whose hosts may share RUN_DIR.
  std::string launcher_log;
  // RUN_DIR holds the chief's checkpoints on this host (`local`; the
  // chief's host of a `cluster`): a restart says which one it resumes from.
  bool sees_checkpoints = false;
  // The tasks run the user's own program, which resumes from checkpoints of
  // its own (BackupAndRestore, torch.save): a restart says so.
  bool program_resumes_itself = false;
  std::chrono::milliseconds hang_timeout{0};  // --hang-timeout (SupervisorOptions); 0: off
};

int RunSupervised(const SupervisedRunOptions& options, const JobRunner::TaskFactory& tasks);

// --max-restarts is not negative and --grace-period (seconds) is 0 to
// kMaxGracePeriod. InvalidArgument naming the flag and its value.
Status CheckSupervisionFlags(int max_restarts, double grace_period_sec);
// --hang-timeout is 0 (off) to kMaxHangTimeout: InvalidArgument naming it.
Status CheckHangTimeout(double hang_timeout_sec);
// A seconds flag (--grace-period, --hang-timeout) as the supervisor takes it (whole milliseconds).
std::chrono::milliseconds DurationOfSeconds(double seconds);
// --grace-period's default, in the flag's seconds.
inline constexpr double kDefaultGracePeriodSec = std::chrono::duration<double>(kDefaultGracePeriod).count();

// Prints "mirrored-launch: error: <message>" on `err`; returns the exit
// code for `status` (ExitCodeFor).
int ReportError(std::ostream& err, const Status& status);

// The arguments after `--` must not set what the launcher sets for each task
// itself: --run-dir (always), --cpu-replicas (when the launcher's own is
// given). InvalidArgument saying where the flag belongs.
Status CheckWorkerArgs(const std::vector<std::string>& worker_args, const std::string& subcommand,
                       bool launcher_sets_cpu_replicas);

// A training job started on RUN_DIR while another job's chief on this
// machine holds it would only fail (its chief refuses, exit 2) after its
// tasks wrote into the other job's logs: InvalidArgument naming the holder,
// before anything starts. A holder on another machine is left to the chief
// (it may be a dead node's lock on a network file system, which the chief
// waits out).
Status CheckRunDirFree(const std::string& run_dir);

// CheckRunDirFree, then the launcher's own lock on RUN_DIR (held while the
// returned object lives): a second job started from this machine is refused
// even before the first one's chief has locked the directory.
StatusOr<std::optional<RunDirLock>> ClaimRunDir(const std::string& run_dir);

// "runs/20261122-031500": the default run directory's name (for --dry-run).
std::string DefaultRunDir();
// Creates a new default run directory: DefaultRunDir(), or with "-2", "-3",
// ... appended when a job started in the same second has that name (never
// one that exists: a job must not resume another's checkpoints by chance).
StatusOr<std::string> MakeDefaultRunDir();

}  // namespace mirrored
