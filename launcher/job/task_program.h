// What every task of a job runs: mirrored-worker with the flags after `--`,
// or the user's own program (the first word after `--`, when it is not a
// flag), and what such a program gets besides TF_CONFIG: the variables
// torchrun sets, so a TensorFlow MultiWorkerMirroredStrategy script or a
// torch.distributed (`env://`) script runs unchanged (docs/user-programs.md).
//
//   auto program = ChooseTaskProgram(worker_binary_flag, after_dashes);  // {"/usr/bin/python3", "train.py"}
//   if (!program->is_mirrored_worker) env += TorchDistributedEnvironment(TorchWorldOf(cluster, task), ...);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster/cluster_spec.h"
#include "common/status.h"
#include "launcher/process/job_supervisor.h"

namespace mirrored {

struct TaskProgram {
  // The program (a path: a bare name is looked up in PATH) and its arguments.
  std::vector<std::string> argv;
  // mirrored-worker (the default, --worker-binary, or a program of that
  // name): the launcher adds --run-dir (and --cpu-replicas) to its
  // arguments. Any other program gets MIRRORED_RUN_DIR and the
  // torch.distributed variables instead, and its arguments as given.
  bool is_mirrored_worker = true;
};

// The mirrored-worker to start: --worker-binary if given, else
// $MIRRORED_WORKER_BINARY, else the mirrored-worker beside this executable.
std::string ResolveWorkerBinary(const std::string& flag_value);

// The words after `--` (`after_dashes`): when the first is not a flag it is
// the program and the rest its arguments; otherwise they are all
// mirrored-worker's flags, and the program is --worker-binary, else
// $MIRRORED_WORKER_BINARY, else the mirrored-worker beside mirrored-launch.
// `path_variable` is the PATH a bare program name is looked up in.
// Errors (exit 2): InvalidArgument for a program given both ways; NotFound
// / PermissionDenied naming a program that is not found or not executable.
StatusOr<TaskProgram> ChooseTaskProgram(const std::string& worker_binary_flag,
                                        const std::vector<std::string>& after_dashes,
                                        const std::string& path_variable);

// The program `words` run (the first the program, the rest its arguments),
// resolved as ResolveProgram does; mirrored-worker when the program's file
// name is mirrored-worker. `what` names it in errors ("--evaluator-command").
StatusOr<TaskProgram> ProgramOf(std::vector<std::string> words, const std::string& what,
                                const std::string& path_variable);

// The words of --evaluator-command "python3 eval.py --x 'a b'": split as a
// shell splits them (blanks; '...' and "..." quote; \ escapes), nothing
// else interpreted. InvalidArgument for an unterminated quote or no word.
StatusOr<std::vector<std::string>> SplitCommandWords(const std::string& command);

// `program` (a path, or a bare name looked up in `path_variable` as execvp
// does) as the path that would be run. NotFound / PermissionDenied naming
// it, and the directories searched.
StatusOr<std::string> ResolveProgram(const std::string& program, const std::string& path_variable);

// A training task's place in the job as torch.distributed counts it: the
// cluster's training tasks in rank order (chief first), hosts numbered in
// the order their first task comes.
struct TorchWorld {
  std::string master_addr;  // the chief's host
  int master_port = 0;      // the chief's port (rank 0 listens there)
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // among the training tasks at its host
  int local_world_size = 1;
  int group_rank = 0;        // its host's number ("node rank")
  int group_world_size = 1;  // hosts
};

// nullopt for a task that is not a training task of `cluster`.
std::optional<TorchWorld> TorchWorldOf(const ClusterSpec& cluster, const TaskId& task);

// The variables torchrun gives each worker ("KEY=VALUE"): MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME,
// TORCHELASTIC_RESTART_COUNT (`restart_count`: the job's generation),
// TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID and, unless empty,
// TORCHELASTIC_ERROR_FILE (where torch's @record writes an uncaught
// exception; the failure report quotes it).
std::vector<std::string> TorchDistributedEnvironment(const TorchWorld& world, int restart_count, int max_restarts,
                                                     const std::string& run_id, const std::string& error_file);

// What a user's program gets in `t` instead of mirrored-worker's --run-dir
// (and of the liveness pipe it does not write to): MIRRORED_RUN_DIR,
// PYTHONUNBUFFERED, and for a training task of `cluster` torch.distributed's
// variables, its error file under RUN_DIR/logs.
void AddUserProgramEnvironment(const ClusterSpec& cluster, const TaskId& task, const std::string& run_dir,
                               int generation, int max_restarts, TaskLaunch& t);

// PYTHONUNBUFFERED=1 unless `env` sets it: a Python program's prints reach
// the console (and the failure report's last lines) as they are made, not
// when a pipe's buffer fills or the program exits.
void AddUnbufferedPython(std::vector<std::string>& env);

// Whether `entry` ("KEY=VALUE") sets a variable TorchDistributedEnvironment
// sets, or MIRRORED_RUN_DIR: the launcher's values replace inherited ones.
bool IsUserProgramVariable(const std::string& entry);

// The variable a user program reads its run directory from.
inline constexpr char kRunDirVariable[] = "MIRRORED_RUN_DIR";

}  // namespace mirrored
