#include "launcher/local_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/cpu_cores.h"
#include "common/decimal_integer.h"
#include "common/flag_checks.h"
#include "launcher/job/local_job_plan.h"
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
  subcommand_->add_flag("--dry-run", dry_run_, "Print each task's command, TF_CONFIG and environment; start nothing");
  subcommand_->add_flag("--no-tls", no_tls_,
                        "Serve the coordination service in plaintext (default: TLS with a CA made for the job in "
                        "RUN_DIR/tls)");
  subcommand_->add_option("--worker-binary", worker_binary_,
                          "mirrored-worker to start (default: $MIRRORED_WORKER_BINARY, else the one beside "
                          "mirrored-launch)");
  subcommand_->add_option("worker_args", worker_args_, "Arguments for every task, after --");
}

int LocalCommand::Run(std::ostream& out, std::ostream& err) {
  if (max_restarts_ < 0) {
    err << "mirrored-launch: error: --max-restarts " << max_restarts_ << " must not be negative\n";
    return kExitUsage;
  }
  if (!(grace_period_sec_ >= 0) || grace_period_sec_ > 86400) {
    err << "mirrored-launch: error: --grace-period " << grace_period_sec_ << " must be 0 to 86400 seconds\n";
    return kExitUsage;
  }
  if (Status s = CheckWorkerArgs(worker_args_, "local", cpu_replicas_option_->count() > 0); !s.ok()) {
    err << "mirrored-launch: error: " << s.message() << "\n";
    return kExitUsage;
  }
  if (cpu_replicas_option_->count() > 0 && cpu_replicas_ < 1) {
    err << "mirrored-launch: error: --cpu-replicas " << cpu_replicas_ << " must be at least 1\n";
    return kExitUsage;
  }
  LocalJobOptions options;
  options.workers = workers_;
  if (gpus_per_worker_option_->count() > 0) options.gpus_per_worker = gpus_per_worker_;  // < 0: refused
  if (cpu_replicas_option_->count() > 0) options.cpu_replicas = cpu_replicas_;
  options.evaluator = evaluator_;
  if (evaluator_gpus_option_->count() > 0) options.evaluator_gpus = evaluator_gpus_;  // refused without --evaluator
  std::string made_run_dir;  // a new default one, removed again if nothing starts
  if (!run_dir_.empty()) {
    options.run_dir = run_dir_;
  } else if (dry_run_) {
    options.run_dir = DefaultRunDir();
  } else {
    auto made = MakeDefaultRunDir();
    if (!made.ok()) {
      err << "mirrored-launch: error: " << made.status().message() << "\n";
      return ExitCodeFor(made.status());
    }
    options.run_dir = made_run_dir = *made;
  }
  options.worker_binary = ResolveWorkerBinary(worker_binary_);
  options.worker_args = worker_args_;
  const auto env = CurrentEnvironment();
  options.visible_gpus = VisibleGpus(env);
  // The workers share this machine's cores: each computes with its share
  // (split again among its CPU replicas), not with all of them, which would
  // oversubscribe the cores workers-fold (libgomp's spinning waits then
  // collapse throughput). A user's OMP_NUM_THREADS is kept; one a worker
  // would not take as a thread count ("4,2") would leave it on every core,
  // so the share replaces it, said once.
  const int cores = UsableCpuCores();
  const std::string share = std::to_string(std::max(1, cores / std::max(1, workers_)));
  options.omp_num_threads = share;
  if (const auto user = std::find_if(env.begin(), env.end(),
                                     [](const std::string& e) { return e.rfind("OMP_NUM_THREADS=", 0) == 0; });
      user != env.end()) {
    const std::string value = user->substr(sizeof("OMP_NUM_THREADS"));
    if (std::optional<int> n = ParseThreadCount(value)) {
      options.omp_num_threads = value;
      if (static_cast<int64_t>(*n) * workers_ > cores) {
        err << "mirrored-launch: warning: OMP_NUM_THREADS " << *n << " x " << workers_ << " worker(s) is more than the "
            << cores << " core(s) here: the tasks' threads will wait for each other's cores (unset it for "
            << share << " each)\n";
      }
    } else if (!value.empty()) {
      err << "mirrored-launch: warning: OMP_NUM_THREADS \"" << value << "\" is not a thread count: every task gets "
          << share << " (the cores / --workers)\n";
    }
  }
  // Every CPU replica computes with at least one thread: more replicas
  // than cores take turns on them, whatever OMP_NUM_THREADS says. Twice the
  // cores (the demo's 2 x 2 on 2 cores) costs little; more is warned about.
  const bool cpu_workers = options.visible_gpus.empty() || options.gpus_per_worker == 0;
  const int64_t replica_threads = static_cast<int64_t>(workers_) * options.cpu_replicas.value_or(1);
  if (cpu_workers && replica_threads > 2 * static_cast<int64_t>(cores)) {
    err << "mirrored-launch: warning: " << workers_ << " worker(s) x " << options.cpu_replicas.value_or(1)
        << " CPU replica(s) is " << replica_threads << " replicas, each computing with at least one thread, on "
        << cores << " core(s): they will take turns on the cores (fewer replicas with a larger --batch-per-replica "
           "train on the same global batch)\n";
  }

  auto plan = PlanLocalJob(options);
  if (!plan.ok()) {
    if (!made_run_dir.empty()) rmdir(made_run_dir.c_str());
    err << "mirrored-launch: error: " << plan.status().message() << "\n";
    return ExitCodeFor(plan.status());
  }
  if (dry_run_) {
    out << "# mirrored-launch local --dry-run: " << plan->workers() << " worker(s)"
        << (evaluator_ ? " + evaluator" : "") << ", run directory " << options.run_dir
        << ", coordination service at " << plan->coordinator_address()
        << " (ports are picked again when the job starts)\n";
    return DryRun(plan->Tasks(0, env), out, err);
  }
  auto claim = ClaimRunDir(options.run_dir);  // held until the job ends
  if (!claim.ok()) {
    err << "mirrored-launch: error: " << claim.status().message() << "\n";
    return ExitCodeFor(claim.status());
  }
  // The tasks meet over TLS with certificates of a CA made for this job
  // alone (docs/security.md).
  auto task_env = no_tls_ ? StatusOr<std::vector<std::string>>(env) : WithLocalJobTls(options.run_dir, env);
  if (!task_env.ok()) {
    err << "mirrored-launch: error: " << task_env.status().message() << "\n";
    return ExitCodeFor(task_env.status());
  }
  err << "mirrored-launch: local job: " << plan->workers() << " worker(s)" << (evaluator_ ? " + evaluator" : "")
      << ", run directory " << options.run_dir << ", coordination service at " << plan->coordinator_address()
      << "\n";
  SupervisedRunOptions run{.run_dir = options.run_dir,
                           .max_restarts = max_restarts_,
                           .grace_period = std::chrono::milliseconds(static_cast<long>(grace_period_sec_ * 1000)),
                           .launcher_log = "launcher.log",
                           .sees_checkpoints = true};
  return RunSupervised(run, [&](int generation) { return plan->Tasks(generation, *task_env); });
}

}  // namespace mirrored
