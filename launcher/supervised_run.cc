#include "launcher/supervised_run.h"

#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/run_dir/checkpoint_reader.h"
#include "common/run_dir/run_dir_lock.h"
#include "launcher/job/local_job_plan.h"

namespace mirrored {
namespace {

std::atomic<JobSupervisor*> g_supervisor{nullptr};

void OnStopSignal(int sig, siginfo_t* info, void*) {
  if (JobSupervisor* s = g_supervisor.load()) s->RequestStop(sig, info != nullptr ? info->si_pid : 0);
}

// Installs the handlers for the lifetime of one run.
class StopSignalScope {
 public:
  explicit StopSignalScope(JobSupervisor* s) {
    g_supervisor.store(s);
    struct sigaction sa {};
    sa.sa_sigaction = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
  }
  ~StopSignalScope() { g_supervisor.store(nullptr); }
};

// The checkpoint a restarted job resumes from: RUN_DIR's latest complete
// one ("ckpt-40"), "" for none. Quiet about damaged ones: the chief names
// them when it falls back past them.
std::string LatestCheckpointName(const std::string& run_dir) {
  std::vector<CheckpointReader::Skipped> skipped;
  auto complete = CheckpointReader(FileEnv::Default(), run_dir).ListComplete(&skipped);
  if (!complete.ok()) return complete.status().code() == StatusCode::kNotFound ? "" : "the latest checkpoint";
  if (complete->empty()) return "";
  return std::filesystem::path(complete->back().dir).filename().string();
}

}  // namespace

int RunSupervised(const SupervisedRunOptions& options, const JobRunner::TaskFactory& tasks) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(options.run_dir) / "logs", ec);
  if (ec) {
    std::cerr << "mirrored-launch: error: cannot create run directory " << options.run_dir << "/logs: "
              << ec.message() << "\n";
    return kExitUsage;
  }
  ConsoleWriter console(STDOUT_FILENO);
  ConsoleWriter report(STDERR_FILENO);
  // What the launcher said (which task failed first, how, its last lines,
  // restarts) outlives the terminal: a job run in the background or under
  // a scheduler keeps its report beside the tasks' logs.
  int launcher_log = -1;
  if (!options.launcher_log.empty()) {
    const std::string path = (std::filesystem::path(options.run_dir) / "logs" / options.launcher_log).string();
    launcher_log = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (launcher_log < 0) {
      std::cerr << "mirrored-launch: warning: cannot open " << path << ": " << std::strerror(errno)
                << " (the launcher's report goes to the console only)\n";
    } else {
      WriteLogHeader(launcher_log, "launcher (pid " + std::to_string(getpid()) + ") started");
      console.CopyLinesWithPrefix("[mirrored-launch] ", launcher_log);
      report.CopyLinesWithPrefix("[mirrored-launch] ", launcher_log);
    }
  }
  struct CloseAtEnd {
    int fd;
    ~CloseAtEnd() {
      if (fd >= 0) close(fd);
    }
  } close_log{launcher_log};
  JobSupervisor supervisor(&console, {.grace_period = options.grace_period,
                                      .evaluator_restarts = options.max_restarts,
                                      .hang_timeout = options.hang_timeout});
  StopSignalScope signals(&supervisor);
  JobRunnerOptions runner_options{.max_restarts = options.max_restarts};
  runner_options.program_resumes_itself = options.program_resumes_itself;
  if (options.sees_checkpoints && !options.program_resumes_itself) {
    runner_options.resume_point = [run_dir = options.run_dir] { return LatestCheckpointName(run_dir); };
  }
  JobRunner runner(&supervisor, &report, runner_options);
  return runner.Run(tasks);
}

Status CheckRunDirFree(const std::string& run_dir) {
  if (std::optional<std::string> holder = RunDirLock::HeldOnThisMachine(run_dir)) {
    return InvalidArgumentError("--run-dir " + run_dir + " is in use by another job (its chief: " + *holder +
                                "): give another --run-dir, or wait for that job to end");
  }
  return OkStatus();
}

StatusOr<std::optional<RunDirLock>> ClaimRunDir(const std::string& run_dir) {
  MIRRORED_RETURN_IF_ERROR(CheckRunDirFree(run_dir));
  return RunDirLock::AcquireForLauncher(run_dir);
}

Status CheckSupervisionFlags(int max_restarts, double grace_period_sec) {
  std::ostringstream message;
  if (max_restarts < 0) {
    message << "--max-restarts " << max_restarts << " must not be negative";
    return InvalidArgumentError(message.str());
  }
  if (!(grace_period_sec >= 0) || grace_period_sec > std::chrono::duration<double>(kMaxGracePeriod).count()) {
    message << "--grace-period " << grace_period_sec << " must be 0 to "
            << std::chrono::seconds(kMaxGracePeriod).count() << " seconds";
    return InvalidArgumentError(message.str());
  }
  return OkStatus();
}

Status CheckHangTimeout(double hang_timeout_sec) {
  const double max_sec = std::chrono::duration<double>(kMaxHangTimeout).count();
  if (!(hang_timeout_sec >= 0) || hang_timeout_sec > max_sec) {
    std::ostringstream message;
    message << "--hang-timeout " << hang_timeout_sec << " must be 0 (off) to " << max_sec << " seconds";
    return InvalidArgumentError(message.str());
  }
  return OkStatus();
}

std::chrono::milliseconds DurationOfSeconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
}

int ReportError(std::ostream& err, const Status& status) {
  err << "mirrored-launch: error: " << status.message() << "\n";
  return ExitCodeFor(status);
}

Status CheckWorkerArgs(const std::vector<std::string>& worker_args, const std::string& subcommand,
                       bool launcher_sets_cpu_replicas) {
  for (const std::string& a : worker_args) {
    if (a == "--run-dir" || a.starts_with("--run-dir=")) {
      return InvalidArgumentError("--run-dir after `--`: the launcher gives every task its run directory; pass it "
                                  "to mirrored-launch instead, before `--` (mirrored-launch " + subcommand + " --run-dir DIR -- ...)");
    }
    if (launcher_sets_cpu_replicas && (a == "--cpu-replicas" || a.starts_with("--cpu-replicas="))) {
      return InvalidArgumentError("--cpu-replicas is given both to mirrored-launch and after `--`: keep one");
    }
  }
  return OkStatus();
}

std::string DefaultRunDir() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "runs/%Y%m%d-%H%M%S", &tm);
  return buf;
}

StatusOr<std::string> MakeDefaultRunDir() {
  const std::string base = DefaultRunDir();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(base).parent_path(), ec);
  if (ec) return InvalidArgumentError("cannot create the default run directory's parent (runs/): " + ec.message() +
                                      "; give --run-dir");
  for (int n = 1; n < 1000; ++n) {
    const std::string name = n == 1 ? base : base + "-" + std::to_string(n);
    if (mkdir(name.c_str(), 0777) == 0) return name;  // ours alone: mkdir is atomic
    if (errno != EEXIST) {
      return InvalidArgumentError("cannot create the default run directory " + name + ": " + std::strerror(errno) +
                                  "; give --run-dir");
    }
  }
  return InvalidArgumentError("no free default run directory name after " + base + "-999; give --run-dir");
}

}  // namespace mirrored
