#include "launcher/local_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/cpu_cores.h"
#include "common/decimal_integer.h"
#include "common/flag_checks.h"
#include "launcher/job/local_job_plan.h"
#include "launcher/job/task_program.h"
#include "launcher/dry_run.h"
#include "launcher/supervised_run.h"
#include "launcher/tls/tls_file_set.h"

namespace mirrored {

void LocalCommand::Register(CLI::App& app) {
  subcommand_ = app.add_subcommand("local", "Run a whole job on this host: N workers (and an evaluator)");
  subcommand_->add_option("--workers", workers_, "Worker processes")
      ->capture_default_str()
      ->transform(DecimalInteger<int>());
  gpus_per_worker_option_ =
      subcommand_->add_option("--gpus-per-worker", gpus_per_worker_,
                              "GPUs per worker (default: the visible GPUs split evenly; 0: CPU replicas only, "
                              "the GPUs hidden)")
          ->transform(DecimalInteger<int>());
  cpu_replicas_option_ =
      subcommand_->add_option("--cpu-replicas", cpu_replicas_, "CPU replicas per worker without a GPU")
          ->transform(DecimalInteger<int>());
  subcommand_->add_flag("--evaluator", evaluator_, "Also run an evaluator task");
  evaluator_gpus_option_ =
      subcommand_->add_option("--evaluator-gpus", evaluator_gpus_,
                              "GPUs for the --evaluator, the next after the workers' (default 0: it evaluates "
                              "on the CPU; without --gpus-per-worker the workers split the rest)")
          ->transform(DecimalInteger<int>());
  subcommand_->add_option("--run-dir", run_dir_, "Run directory (default: runs/<date-time>)")
      ->check(NonEmptyPath("--run-dir", "give a directory, or leave the flag out for a new runs/<date-time>"));
  subcommand_->add_option("--max-restarts", max_restarts_, "Whole-job restarts after a failure")
      ->capture_default_str()
      ->transform(DecimalInteger<int>());
  subcommand_->add_option("--grace-period", grace_period_sec_,
                          "Seconds between SIGTERM and SIGKILL when stopping tasks")
      ->capture_default_str();
  subcommand_->add_option("--hang-timeout", hang_timeout_sec_,
                          "Seconds a training task may print nothing and use no CPU time before it is stopped as "
                          "hung (exit 4; default 0: off)");
  subcommand_->add_option("--evaluator-command", evaluator_command_,
                          "What the --evaluator task runs instead of the program after `--` (\"python3 eval.py\")");
  subcommand_->add_flag("--dry-run", dry_run_, "Print each task's command, TF_CONFIG and environment; start nothing");
  subcommand_->add_flag("--no-tls", no_tls_,
                        "Serve the coordination service in plaintext (default: TLS with a CA made for the job in "
                        "RUN_DIR/tls)");
  subcommand_->add_option("--worker-binary", worker_binary_,
                          "mirrored-worker to start (default: $MIRRORED_WORKER_BINARY, else the one beside "
                          "mirrored-launch)");
  subcommand_->add_option("worker_args", worker_args_,
                          "After --: mirrored-worker's flags, or your own program and its arguments "
                          "(-- python3 train.py ...)");
}

namespace {

// --run-dir, else a new default one (only named, for --dry-run). `made`:
// whether it was created here (removed again if nothing starts).
StatusOr<std::string> ChooseRunDir(const std::string& flag, bool dry_run, bool* made) {
  *made = false;
  if (!flag.empty()) return flag;
  if (dry_run) return DefaultRunDir();
  MIRRORED_ASSIGN_OR_RETURN(std::string dir, MakeDefaultRunDir());
  *made = true;
  return dir;
}

// OMP_NUM_THREADS for every task. The workers share this machine's cores:
// each computes with its share (split again among its CPU replicas), not
// with all of them, which would oversubscribe the cores workers-fold
// (libgomp's spinning waits then collapse throughput). A user's
// OMP_NUM_THREADS is kept; one a worker would not take as a thread count
// ("4,2") would leave it on every core, so the share replaces it, said once.
std::string ThreadsPerWorker(int workers, int cores, const std::vector<std::string>& env, std::ostream& err) {
  const std::string share = std::to_string(std::max(1, cores / std::max(1, workers)));
  const auto user = std::find_if(env.begin(), env.end(),
                                 [](const std::string& e) { return e.rfind("OMP_NUM_THREADS=", 0) == 0; });
  if (user == env.end()) return share;
  const std::string value = user->substr(sizeof("OMP_NUM_THREADS"));
  if (std::optional<int> n = ParseThreadCount(value)) {
    if (static_cast<int64_t>(*n) * workers > cores) {
      err << "mirrored-launch: warning: OMP_NUM_THREADS " << *n << " x " << workers << " worker(s) is more than the "
          << cores << " core(s) here: the tasks' threads will wait for each other's cores (unset it for " << share
          << " each)\n";
    }
    return value;
  }
  if (!value.empty()) {
    err << "mirrored-launch: warning: OMP_NUM_THREADS \"" << value << "\" is not a thread count: every task gets "
        << share << " (the cores / --workers)\n";
  }
  return share;
}

// Every CPU replica computes with at least one thread: more replicas than
// cores take turns on them, whatever OMP_NUM_THREADS says. Twice the cores
// (the demo's 2 x 2 on 2 cores) costs little; more is warned about.
void WarnAboutReplicaThreads(const LocalJobOptions& options, int cores, std::ostream& err) {
  const bool cpu_workers = options.visible_gpus.empty() || options.gpus_per_worker == 0;
  const int64_t replica_threads = static_cast<int64_t>(options.workers) * options.cpu_replicas.value_or(1);
  if (cpu_workers && replica_threads > 2 * static_cast<int64_t>(cores)) {
    err << "mirrored-launch: warning: " << options.workers << " worker(s) x " << options.cpu_replicas.value_or(1)
        << " CPU replica(s) is " << replica_threads << " replicas, each computing with at least one thread, on "
        << cores << " core(s): they will take turns on the cores (fewer replicas with a larger --batch-per-replica "
           "train on the same global batch)\n";
  }
}

// The visible GPUs split evenly (no --gpus-per-worker) may leave some
// idle, or every worker without one: said, since a job that trains on CPU
// replicas beside an idle GPU looks like a slow GPU job.
void WarnAboutIdleGpus(const LocalJobOptions& options, std::ostream& err) {
  const int visible = static_cast<int>(options.visible_gpus.size());
  if (visible == 0 || options.gpus_per_worker) return;
  const int for_workers = visible - options.evaluator_gpus.value_or(0);
  if (for_workers <= 0) return;
  const int per_worker = for_workers / options.workers;
  const int idle = for_workers - per_worker * options.workers;
  if (per_worker == 0) {
    err << "mirrored-launch: warning: " << for_workers << " GPU(s) for " << options.workers
        << " workers: split evenly, each worker gets none and trains on CPU replicas while the GPU(s) stay idle; "
           "one worker drives every GPU of this host (--workers 1), or give --gpus-per-worker\n";
  } else if (idle > 0) {
    err << "mirrored-launch: warning: " << for_workers << " GPUs for " << options.workers << " workers: "
        << per_worker << " each, " << idle << " left idle (--workers " << for_workers
        << " or a divisor of it uses every one)\n";
  }
}

}  // namespace

Status LocalCommand::CheckFlags() const {
  MIRRORED_RETURN_IF_ERROR(CheckSupervisionFlags(max_restarts_, grace_period_sec_));
  MIRRORED_RETURN_IF_ERROR(CheckHangTimeout(hang_timeout_sec_));
  if (cpu_replicas_option_->count() > 0 && cpu_replicas_ < 1) {
    return InvalidArgumentError("--cpu-replicas " + std::to_string(cpu_replicas_) + " must be at least 1");
  }
  if (!evaluator_command_.empty() && !evaluator_) {
    return InvalidArgumentError("--evaluator-command needs --evaluator: without it no evaluator runs");
  }
  return OkStatus();
}

namespace {

// The program's flags must leave to the launcher what it sets itself;
// --cpu-replicas is mirrored-worker's alone.
Status CheckProgramArgs(const TaskProgram& program, const std::vector<std::string>& worker_args,
                        bool cpu_replicas_given) {
  if (program.is_mirrored_worker) return CheckWorkerArgs(worker_args, "local", cpu_replicas_given);
  if (cpu_replicas_given) {
    return InvalidArgumentError("--cpu-replicas is mirrored-worker's: " + program.argv.front() +
                                " runs one process per task (its own replicas are its business; OMP_NUM_THREADS "
                                "gives each task its share of the cores)");
  }
  return OkStatus();
}

}  // namespace

// The flags as the job plan takes them; a flag not given leaves its
// default to PlanLocalJob.
StatusOr<LocalJobOptions> LocalCommand::OptionsFromFlags() const {
  LocalJobOptions options;
  const std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  MIRRORED_ASSIGN_OR_RETURN(options.program, ChooseTaskProgram(worker_binary_, worker_args_, path));
  MIRRORED_RETURN_IF_ERROR(CheckProgramArgs(options.program, worker_args_, cpu_replicas_option_->count() > 0));
  if (!evaluator_command_.empty()) {
    MIRRORED_ASSIGN_OR_RETURN(std::vector<std::string> words, SplitCommandWords(evaluator_command_));
    MIRRORED_ASSIGN_OR_RETURN(options.evaluator_program, ProgramOf(words, "--evaluator-command", path));
  }
  options.workers = workers_;
  if (gpus_per_worker_option_->count() > 0) options.gpus_per_worker = gpus_per_worker_;  // < 0: refused
  if (cpu_replicas_option_->count() > 0) options.cpu_replicas = cpu_replicas_;
  options.evaluator = evaluator_;
  if (evaluator_gpus_option_->count() > 0) options.evaluator_gpus = evaluator_gpus_;  // refused without --evaluator
  options.max_restarts = max_restarts_;
  return options;
}

int LocalCommand::Run(std::ostream& out, std::ostream& err) {
  if (Status s = CheckFlags(); !s.ok()) return ReportError(err, s);
  StatusOr<LocalJobOptions> options_or = OptionsFromFlags();
  if (!options_or.ok()) return ReportError(err, options_or.status());
  LocalJobOptions& options = *options_or;
  bool made_run_dir = false;
  StatusOr<std::string> run_dir = ChooseRunDir(run_dir_, dry_run_, &made_run_dir);
  if (!run_dir.ok()) return ReportError(err, run_dir.status());
  options.run_dir = *run_dir;
  const auto env = CurrentEnvironment();
  options.visible_gpus = VisibleGpus(env);
  const int cores = UsableCpuCores();
  options.omp_num_threads = ThreadsPerWorker(workers_, cores, env, err);
  WarnAboutReplicaThreads(options, cores, err);
  WarnAboutIdleGpus(options, err);
  StatusOr<LocalJobPlan> plan = PlanLocalJob(options);
  if (!plan.ok()) {
    if (made_run_dir) rmdir(options.run_dir.c_str());
    return ReportError(err, plan.status());
  }
  if (dry_run_) {
    out << "# mirrored-launch local --dry-run: " << plan->workers() << " worker(s)"
        << (evaluator_ ? " + evaluator" : "") << ", run directory " << options.run_dir
        << (plan->runs_mirrored_worker() ? ", coordination service at " : ", worker:0 (and MASTER_PORT) at ")
        << plan->coordinator_address()
        << " (ports are picked again when the job starts)\n";
    return DryRun(plan->Tasks(0, env), options.run_dir, out, err);
  }
  return RunJob(*plan, options.run_dir, env, err);
}

int LocalCommand::RunJob(const LocalJobPlan& plan, const std::string& run_dir, const std::vector<std::string>& env,
                         std::ostream& err) {
  auto claim = ClaimRunDir(run_dir);  // held until the job ends
  if (!claim.ok()) return ReportError(err, claim.status());
  // The tasks meet over TLS with certificates of a CA made for this job
  // alone (docs/security.md).
  // (A user's program meets through its own means: no CA for it.)
  const bool user_program = !plan.runs_mirrored_worker();
  auto task_env = no_tls_ || user_program ? StatusOr<std::vector<std::string>>(env) : WithLocalJobTls(run_dir, env);
  if (!task_env.ok()) return ReportError(err, task_env.status());
  err << "mirrored-launch: local job: " << plan.workers() << " worker(s)" << (evaluator_ ? " + evaluator" : "")
      << ", run directory " << run_dir
      << (user_program ? ", running " + plan.program_name() + ", worker:0 at "
                       : ", coordination service at ")
      << plan.coordinator_address() << "\n";
  SupervisedRunOptions run{.run_dir = run_dir,
                           .max_restarts = max_restarts_,
                           .grace_period = DurationOfSeconds(grace_period_sec_),
                           .launcher_log = "launcher.log",
                           .sees_checkpoints = true,
                           .program_resumes_itself = user_program,
                           .hang_timeout = DurationOfSeconds(hang_timeout_sec_)};
  return RunSupervised(run, [&](int generation) { return plan.Tasks(generation, *task_env); });
}

}  // namespace mirrored
