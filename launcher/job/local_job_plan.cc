#include "launcher/job/local_job_plan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <regex>

#include "common/cluster/cluster_config.h"
#include "common/launcher_environment.h"

extern char** environ;

namespace mirrored {
namespace {

constexpr int kMaxLocalWorkers = 256;

bool HasKey(const std::string& entry, std::string_view key) {
  return entry.size() > key.size() && entry.compare(0, key.size(), key) == 0 &&
         entry[key.size()] == '=';
}

// What the launcher sets for each task (replacing any inherited value);
// everything else, the user's own MIRRORED_* settings included
// (MIRRORED_LOG_LEVEL, MIRRORED_DATA_CACHE, ...), passes through.
bool IsLauncherSetKey(const std::string& entry) {
  return HasKey(entry, "TF_CONFIG") || HasKey(entry, "CUDA_VISIBLE_DEVICES") ||
         HasKey(entry, kJobTokenVariable) || HasKey(entry, kGenerationVariable) ||
         HasKey(entry, kTrainingEndedVariable) || HasKey(entry, "OMP_NUM_THREADS") ||
         HasKey(entry, kLivenessFdVariable) || HasKey(entry, kWholeJobSignalledVariable) ||
         IsUserProgramVariable(entry);
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string GpuCount(int64_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

// How many of the visible GPUs each worker gets, and the evaluator after
// them (the plan hands them out in that order).
struct GpuSplit {
  int per_worker = 0;
  int evaluator = 0;
};

// --evaluator-gpus: a count of the evaluator's own, given only with
// --evaluator (0 when not given).
StatusOr<int> EvaluatorGpus(const LocalJobOptions& options) {
  if (!options.evaluator_gpus) return 0;
  const std::string flag = "--evaluator-gpus " + std::to_string(*options.evaluator_gpus);
  if (*options.evaluator_gpus < 0) return InvalidArgumentError(flag + " must not be negative");
  if (!options.evaluator) {
    return InvalidArgumentError(flag + " needs --evaluator: without it no evaluator runs to use them");
  }
  return *options.evaluator_gpus;
}

StatusOr<GpuSplit> SplitGpus(const LocalJobOptions& options) {
  const int visible = static_cast<int>(options.visible_gpus.size());
  GpuSplit split;
  MIRRORED_ASSIGN_OR_RETURN(split.evaluator, EvaluatorGpus(options));
  if (!options.gpus_per_worker) {
    // The evaluator's GPUs are set aside first: the workers split the rest.
    if (split.evaluator > visible) {
      return InvalidArgumentError("--evaluator-gpus " + std::to_string(split.evaluator) + " needs " +
                                  GpuCount(split.evaluator) + ", " + std::to_string(visible) +
                                  " visible (without --gpus-per-worker the workers split what it leaves)");
    }
    split.per_worker = (visible - split.evaluator) / options.workers;  // leftover GPUs stay idle
    return split;
  }
  split.per_worker = *options.gpus_per_worker;
  if (split.per_worker < 0) {
    return InvalidArgumentError("--gpus-per-worker " + std::to_string(split.per_worker) + " must not be negative");
  }
  // In 64 bits: --gpus-per-worker 2147483647 x 2 overflowed int and passed.
  const int64_t workers_take = int64_t{split.per_worker} * options.workers;
  const std::string workers_flags =
      "--gpus-per-worker " + std::to_string(split.per_worker) + " x --workers " + std::to_string(options.workers);
  if (workers_take > visible) {
    return InvalidArgumentError(workers_flags + " needs " + GpuCount(workers_take) + ", " + std::to_string(visible) +
                                " visible");
  }
  if (workers_take + split.evaluator > visible) {
    return InvalidArgumentError("--evaluator-gpus " + std::to_string(split.evaluator) + " needs " +
                                GpuCount(split.evaluator) + " besides the " + std::to_string(workers_take) +
                                " the workers take (" + workers_flags + "): " +
                                std::to_string(workers_take + split.evaluator) + " in all, " +
                                std::to_string(visible) + " visible");
  }
  return split;
}

}  // namespace

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

std::vector<std::string> VisibleGpus(const std::vector<std::string>& env, const std::string& dev_dir) {
  std::vector<std::string> gpus;
  for (const auto& e : env) {
    if (!HasKey(e, "CUDA_VISIBLE_DEVICES")) continue;
    std::string list = e.substr(sizeof("CUDA_VISIBLE_DEVICES"));
    if (list.empty() || list == "-1") return {};
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      std::string id = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!id.empty()) gpus.push_back(id);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return gpus;
  }
  // One /dev/nvidia<minor> per GPU this machine (or container) exposes. The
  // minor numbers are the driver's, not CUDA's: a container given the
  // host's GPUs 2 and 3 has /dev/nvidia2 and /dev/nvidia3, which CUDA
  // numbers 0 and 1 (it numbers what it can see from 0, gaps closed), so
  // the count is what counts.
  int count = 0;
  if (DIR* dir = opendir(dev_dir.c_str())) {
    static const std::regex kNode("nvidia[0-9]+");
    while (dirent* d = readdir(dir)) count += std::regex_match(d->d_name, kNode) ? 1 : 0;
    closedir(dir);
  }
  for (int id = 0; id < count; ++id) gpus.push_back(std::to_string(id));
  return gpus;
}

Status CheckWorkerBinary(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return NotFoundError("worker binary " + path + " does not exist (build it, or pass --worker-binary PATH)");
  }
  if (S_ISDIR(st.st_mode)) {
    return PermissionDeniedError("worker binary " + path +
                                 " is a directory, not a program (pass --worker-binary PATH/mirrored-worker)");
  }
  if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0 || access(path.c_str(), X_OK) != 0) {
    return PermissionDeniedError("worker binary " + path + " is not executable");
  }
  return OkStatus();
}

std::string MakeJobToken() {
  std::random_device rd;
  std::string token;
  char buf[9];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(buf, sizeof(buf), "%08x", static_cast<unsigned>(rd()));
    token += buf;
  }
  return token;
}

std::vector<std::string> LauncherSetEnvironment(const TaskLaunch& task) {
  std::vector<std::string> out;
  for (const auto& e : task.env)
    if (IsLauncherSetKey(e)) out.push_back(e);
  return out;
}

StatusOr<LocalJobPlan> PlanLocalJob(const LocalJobOptions& options) {
  if (options.workers < 1 || options.workers > kMaxLocalWorkers) {
    return InvalidArgumentError("--workers " + std::to_string(options.workers) +
                                " is out of range: a local job has 1 to " +
                                std::to_string(kMaxLocalWorkers) + " workers");
  }
  if (options.run_dir.empty()) return InvalidArgumentError("--run-dir must not be empty");
  if (options.cpu_replicas && *options.cpu_replicas < 1) {
    return InvalidArgumentError("--cpu-replicas " + std::to_string(*options.cpu_replicas) +
                                " must be at least 1");
  }
  if (options.program.argv.empty()) return InvalidArgumentError("no program to run");
  if (options.program.is_mirrored_worker) MIRRORED_RETURN_IF_ERROR(CheckWorkerBinary(options.program.argv.front()));

  MIRRORED_ASSIGN_OR_RETURN(const GpuSplit split, SplitGpus(options));

  LocalJobPlan plan;
  plan.options_ = options;
  plan.job_token_ = MakeJobToken();
  std::vector<HostPort> addresses;
  for (int i = 0; i < options.workers; ++i) {
    MIRRORED_ASSIGN_OR_RETURN(PortReservation port, PortReservation::Reserve());
    addresses.push_back(HostPort{PortReservation::kHost, static_cast<uint16_t>(port.port())});
    plan.ports_.push_back(std::move(port));
    std::vector<std::string> gpus(options.visible_gpus.begin() + i * split.per_worker,
                                  options.visible_gpus.begin() + (i + 1) * split.per_worker);
    plan.gpus_.push_back(std::move(gpus));
  }
  const auto evaluator_first = options.visible_gpus.begin() + options.workers * split.per_worker;
  plan.evaluator_gpus_.assign(evaluator_first, evaluator_first + split.evaluator);
  MIRRORED_ASSIGN_OR_RETURN(plan.cluster_, ClusterSpec::Create({{std::string(kWorkerJob), std::move(addresses)}}));
  return plan;
}

TaskLaunch LocalJobPlan::MakeTask(const TaskId& task, const std::vector<std::string>& gpus, int generation,
                                  const std::vector<std::string>& inherited) const {
  TaskLaunch t;
  t.name = task.ToString();
  t.is_training = task.type != kEvaluatorJob;
  const TaskProgram& program =
      !t.is_training && options_.evaluator_program ? *options_.evaluator_program : options_.program;
  // Written as the cluster command writes it: a program that reads
  // TF_CONFIG itself sees one shape under either (TensorFlow's own).
  ClusterConfig config;
  config.cluster = cluster_;
  config.task = task;
  t.env = inherited;
  t.env.push_back("TF_CONFIG=" + config.ToTfConfigJson());
  if (program.is_mirrored_worker) t.env.push_back("MIRRORED_JOB_TOKEN=" + job_token_);
  t.env.push_back(std::string(kGenerationVariable) + "=" + std::to_string(generation));
  t.env.push_back(std::string(kWholeJobSignalledVariable) + "=1");
  if (!options_.omp_num_threads.empty()) t.env.push_back("OMP_NUM_THREADS=" + options_.omp_num_threads);
  t.argv = program.argv;
  if (program.is_mirrored_worker) {
    t.argv.insert(t.argv.end(), {"--run-dir", options_.run_dir});
  } else {
    AddUserProgramEnvironment(cluster_, task, options_.run_dir, generation, options_.max_restarts, t);
  }
  // No GPU for this task: hide every device so it runs on the CPU.
  t.env.push_back("CUDA_VISIBLE_DEVICES=" + Join(gpus, ","));
  if (gpus.empty() && options_.cpu_replicas && program.is_mirrored_worker) {
    t.argv.insert(t.argv.end(), {"--cpu-replicas", std::to_string(*options_.cpu_replicas)});
  }
  t.log_path = options_.run_dir + "/logs/" + t.name + ".log";
  return t;
}

std::vector<TaskLaunch> LocalJobPlan::Tasks(int generation, const std::vector<std::string>& base_env) const {
  std::vector<std::string> inherited;
  for (const auto& e : base_env)
    if (!IsLauncherSetKey(e)) inherited.push_back(e);
  std::vector<TaskLaunch> tasks;
  for (int i = 0; i < workers(); ++i) {
    tasks.push_back(MakeTask(TaskId{std::string(kWorkerJob), i}, gpus_[i], generation, inherited));
  }
  if (options_.evaluator) {
    // The evaluator is not part of the training cluster (TF's rule); it gets
    // the GPUs of no worker: its own (--evaluator-gpus), else none, so that
    // it evaluates on the CPU.
    tasks.push_back(MakeTask(TaskId{std::string(kEvaluatorJob), 0}, evaluator_gpus_, generation, inherited));
  }
  return tasks;
}

}  // namespace mirrored
