// ClusterSpec is the validated set of tasks of one job: job name -> ordered
// task addresses, with TensorFlow's rules for who is chief and in which order
// training tasks take ranks. The evaluator is kept but is not a training task.
//
//   StatusOr<ClusterSpec> c = ClusterSpec::Create({{"worker", {a0, a1}}, {"chief", {c0}}});
//   c->TrainingTasks();        // {chief:0, worker:0, worker:1}: rank order
//   c->CoordinatorAddress();   // c0: the chief hosts the coordination service
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cluster/host_port.h"
#include "common/cluster/task_id.h"
#include "common/status.h"

namespace mirrored {

class ClusterSpec {
 public:
  using JobMap = std::map<std::string, std::vector<HostPort>>;

  // An empty spec: no tasks. Only a single local task has one (see
  // ClusterConfig::is_single_local_task); every accessor below that needs a
  // chief requires !empty().
  ClusterSpec() = default;

  // Validates and builds. Invariants after success:
  //  - job names are only chief, worker, evaluator (ps is refused: no
  //    parameter-server training), no job is an empty list;
  //  - at most one chief and at most one evaluator;
  //  - at least one chief or worker;
  //  - no endpoint (host case-insensitive, port) appears twice.
  // Errors: InvalidArgument naming the field, e.g. `cluster.chief has 2 tasks`.
  static StatusOr<ClusterSpec> Create(JobMap jobs);

  // OK for chief, worker and evaluator; InvalidArgument naming `job` for
  // anything else (a dedicated message for ps). Create() applies it too;
  // parsers call it first so a bad job name is reported before its addresses.
  static Status ValidateJobName(const std::string& job);

  bool empty() const { return jobs_.empty(); }
  const JobMap& jobs() const { return jobs_; }

  // Tasks in `job` (0 when the job is absent).
  int NumTasks(const std::string& job) const;
  bool Contains(const TaskId& task) const;
  std::optional<HostPort> AddressOf(const TaskId& task) const;

  // chief:0 when there is a chief job, else worker:0 (TensorFlow's rule).
  TaskId ChiefTask() const;
  // The chief's address: where the coordination service listens.
  HostPort CoordinatorAddress() const;

  // The training tasks in rank order: the chief job first, then workers by
  // index. The evaluator is not among them.
  std::vector<TaskId> TrainingTasks() const;
  // Position of `task` in TrainingTasks(), or nullopt (evaluator, unknown).
  std::optional<int> RankOf(const TaskId& task) const;

  std::optional<HostPort> EvaluatorAddress() const;

  // The training tasks listed at the same host as `task` (itself included
  // when it trains): hosts compared case-insensitively, every loopback
  // name ("localhost", 127.x.x.x, ::1) as one. 0 for a task not in the
  // spec. Names that differ but resolve alike are not matched.
  int TrainingTasksAtHostOf(const TaskId& task) const;
  // `task`'s position (from 0, in rank order) among those tasks; nullopt
  // for a task that does not train or is not in the spec.
  std::optional<int> LocalIndexAtHostOf(const TaskId& task) const;
  // The hosts training tasks are listed at (matched as above), numbered in
  // the order of their first training task: `task`'s host's number
  // (torch.distributed's "group rank"; nullopt as above), and how many.
  std::optional<int> TrainingHostIndexOf(const TaskId& task) const;
  int NumTrainingHosts() const;

 private:
  explicit ClusterSpec(JobMap jobs) : jobs_(std::move(jobs)) {}
  JobMap jobs_;
};

}  // namespace mirrored
