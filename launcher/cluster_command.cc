#include "launcher/cluster_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sys/stat.h>

#include "common/cpu_cores.h"
#include "common/decimal_integer.h"
#include "common/flag_checks.h"
#include "common/launcher_environment.h"
#include "common/cluster/tf_config_parser.h"
#include "launcher/cluster_authentication.h"
#include "launcher/job/gpu_share.h"
#include "launcher/job/local_job_plan.h"
#include "launcher/dry_run.h"
#include "launcher/supervised_run.h"

namespace mirrored {

void ClusterCommand::Register(CLI::App& app) {
  subcommand_ = app.add_subcommand("cluster", "Run this host's task of a multi-host job (TF_CONFIG, Slurm or a Kubernetes Indexed Job)");
  tf_config_option_ = subcommand_->add_option("--tf-config", tf_config_text_,
                                              "TF_CONFIG as a file or a JSON string (default: $TF_CONFIG)");
  tf_config_option_->type_name("FILE|JSON");
  CLI::Option* slurm = subcommand_->add_flag("--from-slurm", source_.from_slurm,
                                             "Resolve the cluster from SLURM_* variables (run under srun)");
  subcommand_->add_option("--slurm-port-base", source_.slurm_port_base, "First port on each node with --from-slurm")
      ->capture_default_str()
      ->needs(slurm)
      ->transform(DecimalInteger<int>());
  tf_config_option_->excludes(slurm);
  subcommand_->add_flag("--from-k8s-indexed-job", source_.from_k8s_indexed_job,
                        "Resolve the cluster of a Kubernetes Indexed Job from JOB_COMPLETION_INDEX and "
                        "MIRRORED_K8S_* variables (deploy/kubernetes/indexed-job.yaml)")
      ->excludes(tf_config_option_)
      ->excludes(slurm);
  subcommand_->add_option("--run-dir", run_dir_, "Run directory: the chief's holds the checkpoints (sent to the other tasks on resume), every host's its logs; an evaluator reads the chief's (default: runs/<date-time>)")
      ->check(NonEmptyPath("--run-dir", "give a directory, or leave the flag out for a new runs/<date-time>"));
  subcommand_->add_option("--max-restarts", max_restarts_, "Restarts of this host's task after a failure")
      ->capture_default_str()
      ->transform(DecimalInteger<int>());
  subcommand_->add_option("--grace-period", grace_period_sec_,
                          "Seconds between SIGTERM and SIGKILL when stopping tasks")
      ->capture_default_str();
  subcommand_->add_option("--hang-timeout", hang_timeout_sec_,
                          "Seconds a training task may print nothing and use no CPU time before it is stopped as "
                          "hung (exit 4; default 0: off)");
  subcommand_->add_option("--evaluator-command", evaluator_command_,
                          "What an evaluator task runs instead of the program after `--` (\"python3 eval.py\")");
  subcommand_->add_flag("--dry-run", dry_run_, "Print the task's command, TF_CONFIG and environment; start nothing");
  subcommand_->add_flag("--insecure", insecure_,
                        "Start without MIRRORED_JOB_TOKEN or TLS client certificates although the cluster is "
                        "reachable off this host");
  subcommand_->add_option("--worker-binary", worker_binary_,
                          "mirrored-worker to start (default: $MIRRORED_WORKER_BINARY, else the one beside "
                          "mirrored-launch)");
  subcommand_->add_option("worker_args", worker_args_,
                          "After --: mirrored-worker's flags, or your own program and its arguments "
                          "(-- python3 train.py ...)");
}

namespace {

// The training tasks the cluster lists at this task's host share its cores.
// Unless something already split them (an affinity mask or a CPU quota
// narrower than the machine: Slurm's binding, a container's limit) or the
// user set OMP_NUM_THREADS to a thread count, each gets its share, as
// `local` gives its workers: all of them on every core would oversubscribe
// the cores (and libgomp's spinning waits collapse throughput). A value the
// worker would not take as a thread count ("", "4,2") would leave it on
// every core: the share replaces it (`replaced`, warned about unless
// empty). nullopt: nothing to set.
struct CoreShare {
  int tasks_here = 1;
  int cores = 1;
  int threads = 1;
  std::optional<std::string> replaced;  // the user's OMP_NUM_THREADS that is no thread count
};
std::optional<CoreShare> CoreShareOf(const ClusterConfig& config, const EnvironmentMap& env) {
  if (config.is_single_local_task || config.IsEvaluator()) return std::nullopt;
  const int here = config.cluster.TrainingTasksAtHostOf(config.task);
  const int cores = UsableCpuCores();
  const std::optional<std::string> user = Lookup(env, "OMP_NUM_THREADS");
  if (here < 2 || (user && ParseThreadCount(*user)) || cores < OnlineCpuCores()) return std::nullopt;
  return CoreShare{.tasks_here = here, .cores = cores, .threads = std::max(1, cores / here), .replaced = user};
}

}  // namespace

StatusOr<TaskProgram> ClusterCommand::ProgramFor(const ClusterConfig& config, const EnvironmentMap& env) const {
  const std::string path = Lookup(env, "PATH").value_or("");
  if (config.IsEvaluator() && !evaluator_command_.empty()) {
    MIRRORED_ASSIGN_OR_RETURN(std::vector<std::string> words, SplitCommandWords(evaluator_command_));
    return ProgramOf(words, "--evaluator-command", path);
  }
  MIRRORED_ASSIGN_OR_RETURN(TaskProgram program, ChooseTaskProgram(worker_binary_, worker_args_, path));
  if (program.is_mirrored_worker) MIRRORED_RETURN_IF_ERROR(CheckWorkerArgs(worker_args_, "cluster", false));
  return program;
}

StatusOr<TaskLaunch> ClusterCommand::PlanTask(const EnvironmentMap& env, int generation,
                                              ClusterConfig* resolved) const {
  ClusterSource source = source_;
  if (tf_config_option_ != nullptr && tf_config_option_->count() > 0) source.tf_config = tf_config_text_;
  MIRRORED_ASSIGN_OR_RETURN(ClusterConfig config, ResolveCluster(source, env));
  if (resolved != nullptr) *resolved = config;
  MIRRORED_ASSIGN_OR_RETURN(const TaskProgram program, ProgramFor(config, env));
  TaskLaunch t;
  t.name = config.task.ToString();
  t.is_training = !config.IsEvaluator();
  const std::string& run_dir = resolved_run_dir_;
  const std::optional<CoreShare> share = CoreShareOf(config, env);
  // Only consulted without CUDA_VISIBLE_DEVICES: the host's device nodes.
  const std::optional<GpuShare> gpus = GpuShareOf(config, env, VisibleGpus({}));
  for (const auto& [key, value] : env) {
    if (key == "TF_CONFIG" || key == kGenerationVariable || key == kTrainingEndedVariable ||
        key == kWholeJobSignalledVariable)
      continue;
    if (key == "OMP_NUM_THREADS" && share) continue;  // replaced below
    if (!program.is_mirrored_worker && IsUserProgramVariable(key + "=")) continue;  // the launcher's own below
    t.env.push_back(key + "=" + value);
  }
  // The worker always reads TF_CONFIG, whatever source the launcher used.
  t.env.push_back("TF_CONFIG=" + config.ToTfConfigJson());
  t.env.push_back(std::string(kGenerationVariable) + "=" + std::to_string(generation));
  if (share) t.env.push_back("OMP_NUM_THREADS=" + std::to_string(share->threads));
  if (gpus) t.env.push_back("CUDA_VISIBLE_DEVICES=" + gpus->cuda_visible_devices);  // "": CPU replicas
  // srun passes a Ctrl-C on to every task of the step at once: no task is
  // interrupted alone, so none tells the job it was (each log would blame
  // whichever told it first).
  if (source.from_slurm) t.env.push_back(std::string(kWholeJobSignalledVariable) + "=1");
  t.argv = program.argv;
  if (program.is_mirrored_worker) {
    t.argv.insert(t.argv.end(), {"--run-dir", run_dir});
  } else {
    AddUserProgramEnvironment(config.cluster, config.task, run_dir, generation, max_restarts_, t);
  }
  t.log_path = run_dir + "/logs/" + t.name + ".log";
  return t;
}

namespace {

// The task was planned, and is one `cluster` runs: a task of a cluster (or
// an evaluator, which needs none: it follows the run directory) that knows
// where its run directory is.
Status CheckPlanned(const ClusterConfig& config, const StatusOr<TaskLaunch>& first, bool run_dir_given) {
  if (config.is_single_local_task && !config.IsEvaluator()) {
    // Without a cluster the task would train alone, into what may be a
    // shared run directory, beside the job it was meant to join.
    return InvalidArgumentError(
        (config.source == "no TF_CONFIG"
             ? std::string("no cluster: TF_CONFIG is not set and no --tf-config, --from-slurm or "
                           "--from-k8s-indexed-job was given")
             : "no cluster: " + config.source + " has no \"cluster\"") +
        "; `cluster` runs this host's task of a multi-host job (for a job on this host alone, use "
        "`mirrored-launch local`)");
  }
  if (!first.ok()) return first.status();
  if (config.IsEvaluator() && !run_dir_given) {
    // A new default directory of its own would never get a checkpoint.
    return InvalidArgumentError(first->name +
                                " needs --run-dir: the chief's run directory, whose checkpoints it follows (on a file "
                                "system this host shares with the chief's)");
  }
  return OkStatus();
}

// What resolving the cluster noticed (the worker re-reads only the
// TF_CONFIG made from it), said once, here; then whether a cluster
// reachable off this host has a token or TLS client certificates (D10):
// the error, or warnings.
Status CheckConfigAndWarn(const ClusterConfig& config, const EnvironmentMap& env,
                       const std::vector<std::string>& worker_args, bool insecure, bool mirrored_worker,
                       std::ostream& err) {
  for (const std::string& warning : config.warnings) err << "mirrored-launch: warning: " << warning << "\n";
  // A user's program does not use mirrored's coordination service: its
  // token and certificates are not its business.
  if (!mirrored_worker) return OkStatus();
  std::vector<std::string> auth_warnings;
  MIRRORED_RETURN_IF_ERROR(CheckClusterAuthentication(config, env, worker_args, insecure, &auth_warnings));
  for (const std::string& warning : auth_warnings) err << "mirrored-launch: warning: " << warning << "\n";
  return OkStatus();
}

// Which of this host's GPUs the task gets, when several training tasks
// share the host.
void SayGpuShare(const ClusterConfig& config, const TaskLaunch& task, const EnvironmentMap& env, std::ostream& err) {
  std::optional<GpuShare> gpus = GpuShareOf(config, env, VisibleGpus({}));
  if (!gpus) return;
  err << "mirrored-launch: " << gpus->tasks_here << " training tasks of the cluster are listed at "
      << config.cluster.AddressOf(config.task)->host << ", which has " << gpus->gpus_here << " GPU(s): " << task.name
      << (gpus->gpus.empty() ? std::string(" gets none and trains on CPU replicas")
                             : " gets GPU(s) " + gpus->cuda_visible_devices)
      << " (CUDA_VISIBLE_DEVICES; set it to choose)\n";
}

// The task's share of this host's cores (CoreShareOf), or a warning when
// the user's OMP_NUM_THREADS oversubscribes them.
void SayCoreShare(const ClusterConfig& config, const TaskLaunch& task, const EnvironmentMap& env, std::ostream& err) {
  if (std::optional<CoreShare> share = CoreShareOf(config, env)) {
    if (share->replaced && !share->replaced->empty()) {
      err << "mirrored-launch: warning: OMP_NUM_THREADS \"" << *share->replaced
          << "\" is not a thread count: the task gets its share of the cores instead\n";
    }
    err << "mirrored-launch: " << share->tasks_here << " training tasks of the cluster are listed at "
        << config.cluster.AddressOf(config.task)->host << ": " << task.name << " computes with OMP_NUM_THREADS="
        << share->threads << " (the " << share->cores << " core(s) here / " << share->tasks_here
        << "; set OMP_NUM_THREADS to choose)\n";
    return;
  }
  const std::optional<std::string> user = Lookup(env, "OMP_NUM_THREADS");
  if (!user || config.IsEvaluator() || config.is_single_local_task) return;
  const int here = config.cluster.TrainingTasksAtHostOf(config.task);
  const std::optional<int> n = ParseThreadCount(*user);
  if (here > 1 && n && static_cast<int64_t>(*n) * here > OnlineCpuCores()) {
    err << "mirrored-launch: warning: OMP_NUM_THREADS " << *n << " x " << here
        << " training tasks listed at this host is more than the " << OnlineCpuCores()
        << " core(s) here: the tasks' threads will wait for each other's cores\n";
  }
}

// What this host runs, as `local` says it: every host of the job prints
// one, so a console shows which task it is and where the job meets.
void SayTask(const ClusterConfig& config, const TaskLaunch& task, const std::string& run_dir, std::ostream& err) {
  const bool chief = config.IsChief();
  const int training = config.NumTrainingTasks();
  err << "mirrored-launch: cluster task " << task.name << (chief ? " (chief)" : "");
  if (config.is_single_local_task) {
    err << " (no cluster in " << config.source << ": it follows the run directory's checkpoints)";
  } else {
    err << " of a job of " << training << " training task" << (training == 1 ? "" : "s")
        << (config.cluster.NumTasks(std::string(kEvaluatorJob)) > 0 ? " + evaluator" : "") << ", from "
        << config.source;
  }
  // The evaluator follows the checkpoints; it never joins the service. A
  // user's program meets at the chief's address by its own means.
  if (!task.reports_liveness) {
    err << ", running " << task.argv.front() << ", the chief (MASTER_ADDR:MASTER_PORT) at "
        << config.cluster.CoordinatorAddress().ToString();
  } else if (!config.IsEvaluator() && !config.is_single_local_task) {
    err << ", coordination service at " << config.cluster.CoordinatorAddress().ToString()
        << (chief ? " (hosted here)" : "");
  }
  err << ", run directory " << run_dir << "\n";
}

}  // namespace

int ClusterCommand::Run(const EnvironmentMap& env, std::ostream& out, std::ostream& err) {
  if (Status s = CheckSupervisionFlags(max_restarts_, grace_period_sec_); !s.ok()) return ReportError(err, s);
  if (Status s = CheckHangTimeout(hang_timeout_sec_); !s.ok()) return ReportError(err, s);
  resolved_run_dir_ = run_dir_.empty() ? DefaultRunDir() : run_dir_;
  ClusterConfig config;
  StatusOr<TaskLaunch> first = PlanTask(env, 0, &config);
  if (Status s = CheckPlanned(config, first, !run_dir_.empty()); !s.ok()) return ReportError(err, s);
  const bool mirrored_worker = first->reports_liveness;  // (only a user's program does not)
  if (Status s = CheckConfigAndWarn(config, env, worker_args_, insecure_, mirrored_worker, err); !s.ok()) {
    return ReportError(err, s);
  }
  SayGpuShare(config, *first, env, err);
  SayCoreShare(config, *first, env, err);
  if (dry_run_) {
    out << "# mirrored-launch cluster --dry-run: task " << first->name << " of this host, run directory "
        << resolved_run_dir_ << "\n";
    return DryRun({*first}, resolved_run_dir_, out, err);
  }
  return RunTask(config, *first, env, err);
}

int ClusterCommand::RunTask(const ClusterConfig& config, const TaskLaunch& first, const EnvironmentMap& env,
                            std::ostream& err) {
  if (run_dir_.empty()) {
    // Created only now that the task is planned (and not for --dry-run).
    StatusOr<std::string> made = MakeDefaultRunDir();
    if (!made.ok()) return ReportError(err, made.status());
    resolved_run_dir_ = *made;
  }
  // Only the chief locks the run directory: other tasks of the same job may
  // share its machine and directory.
  StatusOr<std::optional<RunDirLock>> claim = std::optional<RunDirLock>();  // held until the job ends
  if (config.IsChief()) claim = ClaimRunDir(resolved_run_dir_);
  if (!claim.ok()) return ReportError(err, claim.status());
  SayTask(config, first, resolved_run_dir_, err);
  SupervisedRunOptions run{.run_dir = resolved_run_dir_,
                           .max_restarts = max_restarts_,
                           .grace_period = DurationOfSeconds(grace_period_sec_),
                           .launcher_log = "launcher-" + first.name + ".log",
                           .sees_checkpoints = config.IsChief(),
                           .program_resumes_itself = !first.reports_liveness,
                           .hang_timeout = DurationOfSeconds(hang_timeout_sec_)};
  return RunSupervised(run, [&](int generation) {
    auto task = PlanTask(env, generation);
    return std::vector<TaskLaunch>{task.ok() ? *task : first};
  });
}

}  // namespace mirrored
