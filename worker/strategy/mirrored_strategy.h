// The library API of synchronous data-parallel training, the C++ counterpart
// of tf.distribute's MultiWorkerMirroredStrategy: it joins the job (the chief
// hosts the coordination service; every training task registers and learns
// its ranks), builds the communicators, and runs a function on one thread per
// local replica. A user's own training loop is written against it
// (examples/custom_training_loop.cc); the built-in trainer uses it too.
//
//   StrategyOptions options = StrategyOptions::FromEnvironment();   // the launcher's job token, restarts
//   options.cpu_replicas = 2;
//   MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(config, options));
//   Status s = strategy->RunReplicas([&](ReplicaContext& replica) -> Status {
//     ... replica.communicator().AllReduce(grads, n, ReduceOp::kSum) ...
//   });
//   MIRRORED_RETURN_IF_ERROR(strategy->Shutdown());   // exit barrier
//
// Devices: CPU replicas (`cpu_replicas` threads; shared memory inside the
// process, Gloo between processes) or GPU replicas (one thread per visible
// GPU, bound to it, each rank of one NCCL communicator spanning every GPU of
// every task, created from the unique id the coordination service hands
// out). StrategyOptions::device picks; every task of a job must end up with
// the same kind (checked at rendezvous: InvalidArgument naming the tasks).
// On GPU replicas the communicator's buffers are device memory of the
// replica's GPU; host values go through AllReduceHost / SumAcrossReplicas.
//
// Failure handling: when any task of the job fails, the coordination agent
// aborts the communicators, every replica's pending and later collective
// returns Aborted naming the failed task, and RunReplicas returns it (exit
// code 3). A replica stuck where an abort cannot reach (inside a transport
// call) is not waited for forever: the process exits with that error after
// `abort_grace`. Create ignores SIGPIPE unless the program set its own
// handling: a write to a dead peer's socket then fails with EPIPE (a peer
// failure, exit 3) instead of killing the process. A task whose Create
// fails tells the others through the JoinAttempt it gave Create
// (join_attempt.h), so they do not wait for it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/cluster/cluster_config.h"
#include "common/cluster/host_port.h"
#include "common/status.h"
#include "worker/comm/communicator.h"
#include "worker/comm/replica_group.h"
#include "worker/model/backend.h"
#include "worker/strategy/device_choice.h"
#include "worker/strategy/join_attempt.h"
#include "worker/strategy/strategy_options.h"

namespace mirrored {

namespace coordination {
class CoordinationAgent;
class CoordinationServer;
class CoordinationService;
class CoordinationGlooStore;
class TlsCredentials;
}  // namespace coordination
class ProcessGroup;

// What a replica's thread knows about itself.
class ReplicaContext {
 public:
  int local_replica() const { return local_; }
  int global_rank() const { return communicator_->rank(); }
  int num_replicas_in_sync() const { return communicator_->world_size(); }
  bool is_chief() const { return global_rank() == 0; }
  Communicator& communicator() { return *communicator_; }
  // The CUDA ordinal this replica's thread is bound to; -1 for a CPU replica.
  int gpu() const { return gpu_; }
  bool on_gpu() const { return gpu_ >= 0; }

  // A model backend on this replica's device: the CPU backend, or the GPU
  // backend on gpu() computing in `precision`. Unavailable when the GPU
  // cannot be set up; InvalidArgument for a precision the CPU lacks.
  StatusOr<std::unique_ptr<model::Backend>> MakeBackend(
      model::Precision precision = model::Precision::kFp32) const {
    if (on_gpu()) return model::MakeGpuBackend(gpu_, precision);
    return model::MakeCpuBackend(precision);
  }

  // Reduces `values` (host floats, one per metric, e.g. {loss_sum, correct,
  // count}) across all replicas with SUM, in place, on any device.
  Status SumAcrossReplicas(std::vector<float>& values) {
    return communicator_->AllReduceHost(values.data(), values.size(), ReduceOp::kSum);
  }

 private:
  friend class MirroredStrategy;
  ReplicaContext(int local, Communicator* c, int gpu) : local_(local), communicator_(c), gpu_(gpu) {}
  int local_;
  Communicator* communicator_;
  int gpu_;
};

class MirroredStrategy {
 public:
  // Joins the job described by `config` (a single local task needs no
  // service). Errors: DeadlineExceeded naming missing tasks (registration),
  // Unavailable (the chief's address cannot be bound or reached),
  // Unauthenticated (wrong job token), Aborted (the job already failed),
  // InvalidArgument (no usable device; tasks started with other clusters or
  // settings). `attempt` (optional, one per call; a retry starts it afresh)
  // records how far this call got, for JoinAttempt::ReportFailure to tell
  // the other tasks of its failure; a chief whose own service found the
  // failure keeps the service there for the tasks still to register.
  static StatusOr<std::unique_ptr<MirroredStrategy>> Create(const ClusterConfig& config,
                                                            const StrategyOptions& options,
                                                            JoinAttempt* attempt = nullptr);

  // A training task of a cluster that fails before it calls Create (a bad
  // flag, a wrong data directory): tells the others, so they stop at once
  // naming this error instead of waiting for this task until their
  // registration timeout, as JoinAttempt::ReportFailure does for a join that
  // never reached the service (the chief serves its error in place of the
  // service for up to `wait`). After a failed Create, call ReportFailure on
  // the JoinAttempt given to it instead: this would tell the error again,
  // or serve it in place of a service that already told it.
  static void ReportFailureBeforeJoining(const ClusterConfig& config, const StrategyOptions& options,
                                         const Status& error,
                                         std::chrono::milliseconds wait = std::chrono::seconds(10));

  ~MirroredStrategy();

  int num_replicas_in_sync() const { return world_size_; }
  int local_replicas() const { return local_replicas_; }
  // This task's replicas: GPU ordinals, or the CPU replica count.
  const ReplicaDevices& devices() const { return devices_; }
  bool on_gpu() const { return devices_.gpu; }
  // Training tasks (worker processes) in the job.
  int num_tasks() const { return num_tasks_; }
  int rank_offset() const { return rank_offset_; }
  const std::string& task_name() const { return task_name_; }
  // Every training task of the job, in rank order ({task_name()} alone for a
  // job of one task).
  std::vector<std::string> training_tasks() const {
    return tasks_.empty() ? std::vector<std::string>{task_name_} : tasks_;
  }
  // This task hosts replica 0: it writes checkpoints and logs.
  bool is_chief_task() const { return rank_offset_ == 0; }
  // "4 replicas in sync; worker:0 runs 2 GPU replicas (GPUs 0,1) (global ranks 0-1)".
  std::string Describe() const;

  // Runs fn on one thread per local replica and returns the first error;
  // an error in one replica aborts the others' collectives. An exception
  // escaping fn (a GPU kernel's CudaError) is that replica's error
  // (Internal, naming the replica), not a crash of the process.
  Status RunReplicas(const std::function<Status(ReplicaContext&)>& fn);

  // The job-wide error that aborted this task (OK if none).
  Status job_error() const;

  // A failure of this task that the others must learn (reported to the
  // coordination service so they exit 3 instead of waiting).
  void ReportError(const Status& error);
  // The others must learn `error`, but this process ends by itself right
  // after (a SIGINT, interrupt_report.h): its replicas are not aborted.
  void TellFailureBeforeEnding(const Status& error);

  // Every task of the job must run with the same `settings` (name, value;
  // e.g. {"--model", "cnn"}), or their collectives would not match: each
  // task publishes its own and reads everyone's. Call it on every task, in
  // the same order, before the first collective that depends on them. A
  // single task has nothing to compare. Errors: InvalidArgument naming each
  // setting that differs with every task's value (on every task: they all
  // exit 2); the job error.
  Status CheckTasksAgree(const std::vector<std::pair<std::string, std::string>>& settings);

  // Exit barrier: returns once every task has finished (the chief's service
  // outlives the others' last calls). Errors: the job error; DeadlineExceeded.
  // Runs once: a second call returns the first one's result.
  Status Shutdown();

 private:
  // What registration tells a task about the job (a single local task:
  // its own replicas alone).
  struct Membership {
    std::vector<int> replicas_per_process;  // every training task's, in rank order
    int process_rank = 0;                   // this task's index in it
    std::string nccl_unique_id;             // "": none handed out
  };

  MirroredStrategy() = default;
  // Create's work on this new strategy; `attempt` learns how far it got.
  // Its steps, in order: ChooseDevices, Register (with CheckSameDeviceKind
  // and ConnectProcesses) unless the task trains alone, CreateReplicaGroup.
  Status Join(const ClusterConfig& config, const StrategyOptions& options, JoinAttempt& attempt);
  // This task's replicas from options_.device (InvalidArgument: none usable).
  Status ChooseDevices();
  // The chief starts the service; every task registers with it and learns
  // the job's tasks and its own rank.
  StatusOr<Membership> Register(const ClusterConfig& config, JoinAttempt& attempt);
  Status StartService(const ClusterConfig& config, const HostPort& chief_address,
                      const std::vector<std::string>& tasks, const coordination::TlsCredentials& tls);
  void CreateAgent(const ClusterConfig& config, const HostPort& chief_address, const std::vector<std::string>& tasks,
                   const coordination::TlsCredentials& tls);
  // Where this task reaches the chief's service, warning now about an
  // address that may keep registration waiting.
  std::string ServiceAddress(const ClusterConfig& config, const HostPort& chief_address) const;
  // Registers; a deadline missed for a chief's address that does not
  // resolve says so.
  Status ConnectAgent(const ClusterConfig& config, const HostPort& chief_address);
  // The group between tasks (CPU replicas of a job of several tasks):
  // shared memory when they all run on this host, else Gloo
  // (StrategyOptions::host_transport).
  Status ConnectProcesses(const ClusterConfig& config, int process_rank);
  StatusOr<std::unique_ptr<ProcessGroup>> ConnectHostTransport(const ClusterConfig& config, int process_rank);
  // Gloo among `size` tasks (this one `rank` among them), bound to the
  // address that routes toward task `peer_process`.
  StatusOr<std::unique_ptr<ProcessGroup>> ConnectGlooAmong(const ClusterConfig& config, int rank, int size,
                                                           int peer_process, const std::string& prefix);
  // Ranks and world size from `membership`, then the replicas' collectives:
  // none (one replica in all), NCCL (GPUs) or shared memory plus Gloo.
  Status CreateReplicaGroup(const Membership& membership);
  // After a failed Join: hands the chief's service and server to `attempt`
  // when tasks still to register have not heard the service's error.
  void KeepServiceIn(JoinAttempt& attempt);
  // Stops the communicators, then the agent (the destructor's first part).
  void LeaveJob();
  void OnJobError(const Status& error);
  void SetBusy(bool busy);
  // Every task runs the same kind of replica (GPU or CPU): each publishes
  // its kind in the key-value store and reads everyone's.
  Status CheckSameDeviceKind(const std::vector<std::string>& tasks);
  // NCCL communicators for the local GPUs (every task's GPUs join).
  Status CreateNcclReplicas(const std::string& unique_id);

  std::vector<std::string> tasks_;  // every training task, in rank order (none for a single local task)
  int settings_checks_ = 0;         // CheckTasksAgree calls so far (a key prefix each)
  std::optional<Status> shutdown_result_;
  std::string task_name_ = "worker:0";
  int local_replicas_ = 1;
  int rank_offset_ = 0;
  int world_size_ = 1;
  int num_tasks_ = 1;
  StrategyOptions options_;
  ReplicaDevices devices_;

  std::unique_ptr<coordination::CoordinationService> service_;
  std::unique_ptr<coordination::CoordinationServer> server_;
  std::unique_ptr<coordination::CoordinationAgent> agent_;
  std::unique_ptr<coordination::CoordinationGlooStore> store_;
  // The Gloo group between tasks (CPU replicas; null otherwise). The replica
  // group's Abort() reaches it through a raw pointer, so OnJobError holds a
  // reference to it too, like to replicas_.
  std::shared_ptr<ProcessGroup> process_group_;  // Gloo, checked when check_collectives
  // CpuReplicaGroup or NcclReplicaGroup. Shared with OnJobError (an agent
  // thread), so that an abort in progress keeps the group alive while the
  // strategy is being destroyed; set under mu_ before replicas run.
  std::shared_ptr<ReplicaGroup> replicas_;
  // Collectives this task has started (its first replica's), sent with heartbeats.
  std::shared_ptr<std::atomic<uint64_t>> collectives_started_ = std::make_shared<std::atomic<uint64_t>>(0);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Status job_error_;
  bool busy_ = false;  // replicas or the Gloo rendezvous are running
};

}  // namespace mirrored
