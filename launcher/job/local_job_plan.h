// What `mirrored-launch local` starts: one mirrored-worker per training task
// (and the evaluator) on this host, each with its TF_CONFIG, job token,
// devices and arguments. Pure planning: nothing is started here.
//
//   LocalJobOptions o{.workers = 2, .evaluator = true, .run_dir = "runs/x",
//                     .worker_binary = "build/bin/mirrored-worker"};
//   MIRRORED_ASSIGN_OR_RETURN(LocalJobPlan plan, PlanLocalJob(o));
//   std::vector<TaskLaunch> tasks = plan.Tasks(/*generation=*/0, CurrentEnvironment());
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster/cluster_spec.h"
#include "common/status.h"
#include "launcher/job/port_reservation.h"
#include "launcher/job/task_program.h"
#include "launcher/process/job_supervisor.h"

namespace mirrored {

struct LocalJobOptions {
  int workers = 1;
  std::optional<int> gpus_per_worker;   // default: the visible GPUs split evenly
  std::optional<int> cpu_replicas;      // passed on as --cpu-replicas to GPU-less workers
  bool evaluator = false;
  // --evaluator-gpus: GPUs of the evaluator's own, the next ones after the
  // workers' (default none: it never takes a training GPU by surprise).
  std::optional<int> evaluator_gpus;
  std::string run_dir;                  // required
  // What every task runs (required): mirrored-worker and its flags, or the
  // user's own program (ChooseTaskProgram).
  TaskProgram program;
  // What the evaluator runs instead (--evaluator-command); unset: `program`.
  std::optional<TaskProgram> evaluator_program;
  int max_restarts = 0;                 // told to a user's program (TORCHELASTIC_MAX_RESTARTS)
  std::vector<std::string> visible_gpus;  // device ids this launcher may hand out
  // OMP_NUM_THREADS for every task: the cores each may compute with (the
  // user's own value, or the launcher's share; "": not set).
  std::string omp_num_threads;
};

class LocalJobPlan {
 public:
  // The tasks of one generation. `base_env` is the launcher's environment
  // ("KEY=VALUE"); each task gets it minus TF_CONFIG / CUDA_VISIBLE_DEVICES /
  // MIRRORED_JOB_TOKEN / MIRRORED_GENERATION / OMP_NUM_THREADS, plus its own
  // values of those. A user's program gets MIRRORED_RUN_DIR instead of
  // --run-dir and no token; its training tasks the torch.distributed
  // variables (TorchDistributedEnvironment: rank i, master worker:0).
  std::vector<TaskLaunch> Tasks(int generation, const std::vector<std::string>& base_env) const;

  const std::string& job_token() const { return job_token_; }
  // worker:0's address, where the coordination service listens.
  std::string coordinator_address() const { return cluster_.CoordinatorAddress().ToString(); }
  int workers() const { return cluster_.NumTasks(std::string(kWorkerJob)); }
  // The training tasks run mirrored-worker (not a user's program).
  bool runs_mirrored_worker() const { return options_.program.is_mirrored_worker; }
  // The training tasks' program, as its path.
  const std::string& program_name() const { return options_.program.argv.front(); }

 private:
  friend StatusOr<LocalJobPlan> PlanLocalJob(const LocalJobOptions& options);
  // One task of a generation: `inherited` is the launcher's environment
  // without what the launcher sets.
  TaskLaunch MakeTask(const TaskId& task, const std::vector<std::string>& gpus, int generation,
                      const std::vector<std::string>& inherited) const;
  LocalJobOptions options_;
  std::vector<PortReservation> ports_;          // held for the job's lifetime
  ClusterSpec cluster_;                         // the workers at their ports: every task's TF_CONFIG cluster
  std::vector<std::vector<std::string>> gpus_;  // worker i's devices (may be empty)
  std::vector<std::string> evaluator_gpus_;     // the evaluator's (empty: it evaluates on the CPU)
  std::string job_token_;
};

// The visible GPUs go to the workers first, in order, then the next
// --evaluator-gpus to the evaluator; without --gpus-per-worker the workers
// split evenly what the evaluator leaves. Leftovers stay idle.
// Errors: InvalidArgument naming the flag (`--workers 0 must be at least 1`,
// `--gpus-per-worker 2 × --workers 2 needs 4 GPUs, 1 visible`,
// `--evaluator-gpus 1 needs --evaluator`, `--evaluator-gpus 1 needs 1 GPU
// besides the 2 the workers take ...`), NotFound /
// PermissionDenied for a worker binary that is missing or not executable,
// Unavailable when no loopback port can be reserved.
StatusOr<LocalJobPlan> PlanLocalJob(const LocalJobOptions& options);

// The GPUs this process may use: CUDA_VISIBLE_DEVICES if set (a comma list;
// "" or "-1" means none), else CUDA's ids 0..N-1 for the N /dev/nvidia<minor>
// device nodes in `dev_dir` (the minor numbers themselves are not CUDA ids).
std::vector<std::string> VisibleGpus(const std::vector<std::string>& env, const std::string& dev_dir = "/dev");

// The worker binary exists and is an executable regular file. Errors:
// NotFound / PermissionDenied naming the path (exit code 2), and saying so
// when it is a directory.
Status CheckWorkerBinary(const std::string& path);

// 32 hex characters from the system's random device.
std::string MakeJobToken();

// This process's environment as "KEY=VALUE" entries.
std::vector<std::string> CurrentEnvironment();

// The environment entries a task gets from the launcher (TF_CONFIG,
// MIRRORED_*, CUDA_VISIBLE_DEVICES), for --dry-run and failure reports.
std::vector<std::string> LauncherSetEnvironment(const TaskLaunch& task);

}  // namespace mirrored
