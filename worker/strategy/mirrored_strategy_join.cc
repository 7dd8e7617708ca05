// MirroredStrategy, continued: how a task joins the job. Create and Join
// (the chief's service and server, the agent's registration, the check that
// every task runs the same kind of replica, the Gloo group between tasks or
// the NCCL communicators), and what a failed join leaves behind for the
// tasks still to come (KeepServiceIn, ReportFailureBeforeJoining). The rest
// of the strategy is in mirrored_strategy.cc.
#include "worker/strategy/mirrored_strategy.h"

#include <signal.h>

#include <cstdlib>
#include <numeric>

#include "common/logging.h"
#include "common/launcher_environment.h"
#include "common/seconds_text.h"
#include "mirrored/config.h"
#include "worker/comm/checked_process_group.h"
#include "worker/comm/cpu_replica_group.h"
#include "worker/comm/gloo_process_group.h"
#include "worker/comm/hierarchical_process_group.h"
#include "worker/comm/host_key_list.h"
#include "worker/comm/shared_memory_process_group.h"
#include "worker/comm/solo_replica_group.h"
#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_gloo_store.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/coordination/tls_credentials.h"
#include "worker/coordination/nccl_unique_id.h"
#include "worker/strategy/join_attempt.h"
#include "worker/strategy/local_addresses.h"
#include "worker/strategy/nccl_interface.h"
#include "worker/strategy/terminate_handler.h"

#if MIRRORED_WITH_CUDA
#include "worker/comm/nccl_replica_group.h"
#endif

namespace mirrored {
namespace {

// A peer that dies leaves Gloo writing to a closed socket: SIGPIPE's
// default action would kill this task (exit 141, no message) before the
// failure could be reported as the peer's (exit 3). Unless the program
// chose a disposition of its own, writes fail with EPIPE instead.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction pipe_action {};
  if (sigaction(SIGPIPE, nullptr, &pipe_action) == 0 && pipe_action.sa_handler == SIG_DFL &&
      !(pipe_action.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

// Compared at registration: the training tasks, "chief:0, worker:0,
// worker:1". Not their addresses: hosts may spell one address differently
// (a short name, a full one, an IP), and each task reaches the chief at the
// address it was given.
std::string ClusterText(const std::vector<std::string>& tasks) {
  std::string cluster;
  for (const std::string& t : tasks) cluster += (cluster.empty() ? "" : ", ") + t;
  return cluster;
}

}  // namespace

StatusOr<std::unique_ptr<MirroredStrategy>> MirroredStrategy::Create(const ClusterConfig& config,
                                                                     const StrategyOptions& options,
                                                                     JoinAttempt* attempt) {
  JoinAttempt unkept;  // the caller's, or one that dies with this call
  JoinAttempt& a = attempt != nullptr ? *attempt : unkept;
  a.Reset();  // a retry starts afresh, and frees the port a kept service held
  std::unique_ptr<MirroredStrategy> s(new MirroredStrategy());
  if (Status joined = s->Join(config, options, a); !joined.ok()) {
    if (attempt != nullptr) s->KeepServiceIn(*attempt);
    return joined;
  }
  return s;
}

void MirroredStrategy::KeepServiceIn(JoinAttempt& attempt) {
  // Only a service whose failure some task still to register has not heard
  // (a task started with another cluster): it tells them when they come.
  if (!server_ || service_->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(0)).empty()) return;
  LeaveJob();
  attempt.service_ = std::move(service_);
  attempt.server_ = std::move(server_);
}

Status MirroredStrategy::Join(const ClusterConfig& config, const StrategyOptions& options, JoinAttempt& attempt) {
  IgnoreSigpipeUnlessHandled();
  if (const char* token = std::getenv(kJobTokenVariable); token != nullptr && *token != '\0' && options.job_token.empty()) {
    MIRRORED_LOG(WARNING) << kJobTokenVariable << " is set but StrategyOptions::job_token is empty: this task "
                          << "presents no token (start from StrategyOptions::FromEnvironment())";
  }
  MIRRORED_RETURN_IF_ERROR(CheckJobToken(options.job_token));
  options_ = options;
  task_name_ = config.task.ToString();
  InstallTerminateHandler(task_name_);
  MIRRORED_RETURN_IF_ERROR(ChooseDevices());
  if (devices_.gpu) PinNcclSocketInterface(config);
  Membership membership;  // a single local task: its own replicas alone
  membership.replicas_per_process = {local_replicas_};
  if (!config.is_single_local_task && config.NumTrainingTasks() > 0) {
    MIRRORED_ASSIGN_OR_RETURN(membership, Register(config, attempt));
    if (tasks_.size() > 1) MIRRORED_RETURN_IF_ERROR(CheckSameDeviceKind(tasks_));
    if (tasks_.size() > 1 && !devices_.gpu) MIRRORED_RETURN_IF_ERROR(ConnectProcesses(config, membership.process_rank));
  }
  return CreateReplicaGroup(membership);
}

Status MirroredStrategy::ChooseDevices() {
  // Decided before joining: a task that cannot run its replicas fails now
  // (exit 2) and the launcher stops the others.
  GpuProbe probe;  // a CPU-only task never initialises the CUDA runtime
  if (options_.device != DeviceKind::kCpu) probe = options_.gpu_probe ? options_.gpu_probe() : ProbeGpus();
  MIRRORED_ASSIGN_OR_RETURN(devices_, ResolveReplicaDevices(options_.device, options_.cpu_replicas, probe));
  if (options_.device == DeviceKind::kAuto && devices_.gpu && options_.cpu_replicas != 1) {
    MIRRORED_LOG(WARNING) << "--cpu-replicas " << options_.cpu_replicas << " ignored: " << devices_.Describe()
                          << " (--device auto found GPUs; pass --device cpu for CPU replicas)";
  }
  local_replicas_ = devices_.local_replicas();
  return OkStatus();
}

StatusOr<MirroredStrategy::Membership> MirroredStrategy::Register(const ClusterConfig& config, JoinAttempt& attempt) {
  std::vector<std::string> tasks;
  for (const TaskId& t : config.cluster.TrainingTasks()) tasks.push_back(t.ToString());
  const TaskId chief = config.cluster.ChiefTask();
  const auto chief_address = config.cluster.AddressOf(chief);
  if (!chief_address) return InvalidArgumentError("the chief " + chief.ToString() + " has no address");
  MIRRORED_ASSIGN_OR_RETURN(const coordination::TlsCredentials tls, coordination::TlsCredentials::Load(options_.tls));
  if (config.IsChief()) {
    MIRRORED_RETURN_IF_ERROR(StartService(config, *chief_address, tasks, tls));
    // From here a failure of the join is the service's to tell (or found
    // by it); see KeepServiceIn.
    attempt.reached_service_ = true;
  }
  CreateAgent(config, *chief_address, tasks, tls);
  // Asking to register: the service refuses this task alone, or answers
  // it and every other task with the job's failure.
  attempt.reached_service_ = true;
  MIRRORED_RETURN_IF_ERROR(ConnectAgent(config, *chief_address));
  const auto& view = agent_->cluster_view();
  Membership membership;
  membership.process_rank = agent_->task_index();
  for (const auto& t : view.tasks) membership.replicas_per_process.push_back(t.device_count);
  membership.nccl_unique_id = view.nccl_unique_id;
  MIRRORED_LOG(INFO) << "joined the job: " << view.DebugString();
  tasks_ = tasks;
  return membership;
}

Status MirroredStrategy::StartService(const ClusterConfig& config, const HostPort& chief_address,
                                      const std::vector<std::string>& tasks,
                                      const coordination::TlsCredentials& tls) {
  coordination::CoordinationServiceOptions so;
  so.tasks = tasks;
  so.cluster = ClusterText(tasks);
  for (const TaskId& t : config.cluster.TrainingTasks()) so.task_hosts.push_back(config.cluster.AddressOf(t)->host);
  so.heartbeat_timeout = options_.heartbeat_timeout;
  so.registration_timeout = options_.registration_timeout;
  MIRRORED_ASSIGN_OR_RETURN(service_, coordination::CoordinationService::Create(so));
  service_->StartDeadlineThread();
  MIRRORED_ASSIGN_OR_RETURN(server_, coordination::CoordinationServer::Start(ListenAddress(chief_address),
                                                                             options_.job_token, service_.get(), tls));
  return OkStatus();
}

void MirroredStrategy::CreateAgent(const ClusterConfig& config, const HostPort& chief_address,
                                   const std::vector<std::string>& tasks, const coordination::TlsCredentials& tls) {
  const TaskId chief = config.cluster.ChiefTask();
  coordination::CoordinationAgentOptions ao;
  ao.service_address = ServiceAddress(config, chief_address);
  // The chief over loopback checks its certificate's name, not 127.0.0.1's.
  if (ao.service_address != chief_address.ToString()) ao.tls_server_name = chief_address.host;
  ao.task_name = task_name_;
  ao.device_count = local_replicas_;
  ao.gpu = devices_.gpu;
  ao.job_token = options_.job_token;
  ao.tls = tls;
  ao.service_task = chief.ToString();
  ao.cluster = ClusterText(tasks);
  ao.heartbeat_interval = options_.heartbeat_interval;
  ao.heartbeat_timeout = options_.heartbeat_timeout;
  ao.registration_timeout = options_.registration_timeout;
  // The chief's service is its own, new: nothing of the old generation to wait out.
  ao.restarted = options_.restarted && !(config.task == chief);
  // The program's stop signal (mirrored-worker: the launcher's SIGTERM)
  // ends that wait; without one, it lasts its timeout.
  ao.stop_waiting = options_.stop_waiting ? options_.stop_waiting : [] { return false; };
  ao.collectives_started = collectives_started_;
  ao.liveness_fd = LauncherLivenessFd();
  agent_ = std::make_unique<coordination::CoordinationAgent>(ao);
  agent_->SetErrorCallback([this](const Status& e) { OnJobError(e); });
}

std::string MirroredStrategy::ServiceAddress(const ClusterConfig& config, const HostPort& chief_address) const {
  const TaskId chief = config.cluster.ChiefTask();
  if (config.task == chief && ListenAddress(chief_address).starts_with("0.0.0.0:")) {
    // Where it resolves, to no address of this host: the others reach
    // another host there (a "task" given to the wrong host; given as an
    // IP, the same mistake fails the bind).
    if (std::string elsewhere = NonLocalAddresses(chief_address.host); !elsewhere.empty()) {
      MIRRORED_LOG(WARNING) << "the chief's address " << chief_address.ToString() << " resolves to " << elsewhere
                            << ", no address of this host: the other tasks will look for the chief there. If this "
                               "host is not " << chief_address.host << ", TF_CONFIG's \"task\" here is wrong";
    }
    // The chief reaches its own service over loopback: its TF_CONFIG name
    // need not resolve on its own host (the others report if they cannot).
    return "127.0.0.1:" + std::to_string(chief_address.port);
  }
  if (std::string why = ResolveError(chief_address.host); !why.empty()) {
    // Registration keeps trying (a Kubernetes pod's name resolves once the
    // pod is up), but say at once why it may be waiting.
    MIRRORED_LOG(WARNING) << "the chief's address " << chief_address.ToString() << " (" << chief.ToString()
                          << " in TF_CONFIG's cluster) does not resolve yet: " << why
                          << "; registration keeps trying for --registration-timeout ("
                          << SecondsText(options_.registration_timeout) << ")";
  }
  return chief_address.ToString();
}

Status MirroredStrategy::ConnectAgent(const ClusterConfig& config, const HostPort& chief_address) {
  Status connected = agent_->Connect();
  if (connected.code() == StatusCode::kDeadlineExceeded && !(config.task == config.cluster.ChiefTask())) {
    if (std::string why = ResolveError(chief_address.host); !why.empty()) {
      return DeadlineExceededError(connected.message() + "; the chief's address " + chief_address.ToString() +
                                   " does not resolve: " + why + " (check TF_CONFIG's cluster)");
    }
  }
  return connected;
}

namespace {

// Where each training task runs, as they tell each other through the
// store: the host TF_CONFIG lists it at, and its identity there (boot, PID
// namespace, user: SameHostIdentity), so that only processes that can
// share a segment are taken as one host. A cluster that lists every task
// at a host of its own needs no exchange. Process 0 reads every task's key
// and publishes them as one list (host_key_list.h), which each of the
// others reads: 2N reads in all, not N².
StatusOr<HostLayout> ExchangeHostLayout(const ClusterConfig& config, gloo::rendezvous::Store& store, int process_rank,
                                        int processes) {
  std::vector<std::string> keys;
  if (config.cluster.NumTrainingHosts() == processes) {
    for (int r = 0; r < processes; ++r) keys.push_back(std::to_string(r));
    return HostLayout::FromHostKeys(keys);
  }
  const std::string mine =
      std::to_string(config.cluster.TrainingHostIndexOf(config.task).value_or(-1)) + "|" + SameHostIdentity();
  std::string list;
  std::string waiting_for = "process 0 to publish the tasks' host list (it waits for every process's key)";
  try {
    store.set("host/" + std::to_string(process_rank), std::vector<char>(mine.begin(), mine.end()));
    if (process_rank == 0) {
      for (int r = 0; r < processes; ++r) {
        waiting_for = "the host key of process " + std::to_string(r) + " of " + std::to_string(processes);
        const std::vector<char> theirs = store.get("host/" + std::to_string(r));
        keys.emplace_back(theirs.begin(), theirs.end());
      }
      list = JoinHostKeys(keys);
      store.set("host/all", std::vector<char>(list.begin(), list.end()));
      return HostLayout::FromHostKeys(keys);
    }
    const std::vector<char> all = store.get("host/all");
    list.assign(all.begin(), all.end());
  } catch (const std::exception& e) {
    return DeadlineExceededError("exchanging the tasks' hosts, waiting for " + waiting_for + ": " + e.what());
  }
  MIRRORED_ASSIGN_OR_RETURN(keys, SplitHostKeys(list, processes));
  return HostLayout::FromHostKeys(keys);
}

std::string DescribeHosts(const HostLayout& layout) {
  std::string sizes;
  for (int n : layout.size_of_host) sizes += (sizes.empty() ? "" : "+") + std::to_string(n);
  return std::to_string(layout.hosts()) + " host(s) (" + sizes + " tasks)";
}

}  // namespace

StatusOr<std::unique_ptr<ProcessGroup>> MirroredStrategy::ConnectGlooAmong(const ClusterConfig& config, int rank,
                                                                           int size, int peer_process,
                                                                           const std::string& prefix) {
  // Gloo binds an ephemeral port on this task's own address (the one that
  // routes toward `peer_process`) and meets its peers through the store.
  const auto my_address = config.cluster.AddressOf(config.task);
  const TaskId peer = config.cluster.TrainingTasks()[peer_process];
  const std::string interface = GlooInterfaceAddress(my_address, *config.cluster.AddressOf(peer));
  MIRRORED_LOG(INFO) << "Gloo (TCP) between " << size << " tasks binds " << interface;
  auto gloo = GlooProcessGroup::Connect(*store_, {.rank = rank,
                                                  .size = size,
                                                  .prefix = prefix,
                                                  .interface_address = interface,
                                                  .timeout = options_.collective_timeout});
  if (!gloo.ok()) return gloo.status();
  return std::unique_ptr<ProcessGroup>(std::move(gloo).value());
}

StatusOr<std::unique_ptr<ProcessGroup>> MirroredStrategy::ConnectHostTransport(const ClusterConfig& config,
                                                                               int process_rank) {
  const int processes = static_cast<int>(tasks_.size());
  const auto transport = options_.host_transport;
  const int next_process = (process_rank + 1) % processes;
  if (transport == StrategyOptions::HostTransport::kGloo) {
    MIRRORED_LOG(INFO) << "collectives between the " << processes << " tasks: Gloo (" << kHostTransportVariable
                       << "=gloo)";
    return ConnectGlooAmong(config, process_rank, processes, next_process, "mesh");
  }
  MIRRORED_ASSIGN_OR_RETURN(const HostLayout layout, ExchangeHostLayout(config, *store_, process_rank, processes));
  if (transport == StrategyOptions::HostTransport::kSharedMemory && layout.hosts() > 1) {
    return InvalidArgumentError(std::string(kHostTransportVariable) + "=shm, but the tasks run on " +
                                DescribeHosts(layout) + ": unset it for shared memory within hosts and Gloo between");
  }
  if (layout.hosts() == processes) {
    MIRRORED_LOG(INFO) << "collectives between the " << processes << " tasks: Gloo (one task per host)";
    return ConnectGlooAmong(config, process_rank, processes, next_process, "mesh");
  }
  const int host = layout.host_of[process_rank];
  auto shm = SharedMemoryProcessGroup::Connect(*store_, {.rank = layout.local_rank_of[process_rank],
                                                         .size = layout.size_of_host[host],
                                                         .prefix = "shm/" + std::to_string(host),
                                                         .timeout = options_.collective_timeout});
  if (!shm.ok()) return shm.status();
  if (layout.hosts() == 1) {
    MIRRORED_LOG(INFO) << "collectives between the " << processes << " tasks: shared memory (all on this host)";
    return std::unique_ptr<ProcessGroup>(std::move(shm).value());
  }
  MIRRORED_LOG(INFO) << "collectives between the " << processes << " tasks on " << DescribeHosts(layout)
                     << ": shared memory within each host, Gloo between the hosts' first tasks";
  std::unique_ptr<ProcessGroup> leaders;
  if (layout.leader_of_host[host] == process_rank) {
    const int next_leader = layout.leader_of_host[(host + 1) % layout.hosts()];
    MIRRORED_ASSIGN_OR_RETURN(leaders, ConnectGlooAmong(config, host, layout.hosts(), next_leader, "leaders"));
  }
  return std::unique_ptr<ProcessGroup>(std::make_unique<HierarchicalProcessGroup>(
      process_rank, layout, std::move(shm).value(), std::move(leaders)));
}

Status MirroredStrategy::ConnectProcesses(const ClusterConfig& config, int process_rank) {
  store_ = std::make_unique<coordination::CoordinationGlooStore>(agent_.get(), "grads", options_.registration_timeout);
  // A peer failing now must not leave this task blocked in Gloo's connect
  // (its timeout does not cover it): OnJobError exits instead.
  SetBusy(true);
  auto group = ConnectHostTransport(config, process_rank);
  SetBusy(false);
  if (!group.ok()) {
    if (Status e = job_error(); !e.ok()) return e;
    return group.status();
  }
  std::unique_ptr<ProcessGroup> connected = std::move(group).value();
  std::shared_ptr<ProcessGroup> cross;
  if (options_.check_collectives) {
    MIRRORED_LOG(INFO) << kCheckCollectivesVariable << ": every collective is checked to be the same on every "
                          "task (one small all-reduce more each)";
    cross = std::make_shared<CheckedProcessGroup>(std::move(connected), tasks_);
  } else {
    cross = std::move(connected);
  }
  std::lock_guard<std::mutex> lock(mu_);
  process_group_ = std::move(cross);
  return OkStatus();
}

Status MirroredStrategy::CreateReplicaGroup(const Membership& membership) {
  const std::vector<int>& replicas_per_process = membership.replicas_per_process;
  rank_offset_ = std::accumulate(replicas_per_process.begin(), replicas_per_process.begin() + membership.process_rank, 0);
  world_size_ = std::accumulate(replicas_per_process.begin(), replicas_per_process.end(), 0);
  num_tasks_ = static_cast<int>(replicas_per_process.size());
  if (world_size_ == 1) {
    // One replica in all: every collective is the identity. No NCCL
    // communicator (~580 MiB of GPU memory and part of the start-up) and no
    // shared-memory group for it.
    MIRRORED_LOG(INFO) << "collectives: none needed (one replica in all, on " << devices_.Describe() << ")";
    std::lock_guard<std::mutex> lock(mu_);
    replicas_ = std::make_unique<SoloReplicaGroup>(collectives_started_);
    return OkStatus();
  }
  if (devices_.gpu) {
    if (options_.check_collectives) {
      MIRRORED_LOG(WARNING) << kCheckCollectivesVariable << " is set but checks only CPU replicas' collectives: "
                               "GPU replicas run NCCL's unchecked";
    }
    std::string nccl_unique_id = membership.nccl_unique_id;
    if (nccl_unique_id.empty()) {
      // A single local task has no coordination service: the id is ours.
      MIRRORED_ASSIGN_OR_RETURN(nccl_unique_id, coordination::GenerateNcclUniqueId());
    }
    return CreateNcclReplicas(nccl_unique_id);
  }
  auto group = std::make_unique<CpuReplicaGroup>(
      CpuReplicaGroupOptions{.replicas_per_process = replicas_per_process,
                             .process_rank = membership.process_rank,
                             .timeout = options_.collective_timeout,
                             .collectives_started = collectives_started_},
      process_group_.get());
  std::lock_guard<std::mutex> lock(mu_);  // OnJobError may read replicas_ from the agent's thread
  replicas_ = std::move(group);
  return OkStatus();
}

Status MirroredStrategy::CheckSameDeviceKind(const std::vector<std::string>& tasks) {
  const std::string prefix = "mirrored/replica_device/";
  const std::string mine = devices_.gpu ? "gpu" : "cpu";
  MIRRORED_RETURN_IF_ERROR(agent_->KeyValueSet(prefix + task_name_, mine));
  std::string kinds;
  bool same = true;
  for (const std::string& t : tasks) {
    MIRRORED_ASSIGN_OR_RETURN(std::string kind,
                              agent_->KeyValueGet(prefix + t, options_.registration_timeout.count()));
    same = same && kind == mine;
    kinds += (kinds.empty() ? "" : ", ") + t + " " + kind;
  }
  if (same) return OkStatus();
  // Everyone has read every kind before anyone leaves: the chief's exit
  // takes the service down, and a task still reading would report "service
  // lost" instead of the cause. The barrier's own result does not change the
  // verdict, read from every task: a peer that left it first and reported
  // the same error cancels this task's call (the agent cancels its calls on
  // a job error), and this task must still name the cause, not "task X
  // failed" (exit 2, not 3).
  (void)agent_->Barrier("mirrored/replica_device_checked", options_.registration_timeout.count());
  return InvalidArgumentError("tasks disagree on the replica device (" + kinds +
                              "): every task of a job must run GPU replicas, or every task CPU replicas; check "
                              "--device and each host's GPUs (CUDA_VISIBLE_DEVICES)");
}

void MirroredStrategy::ReportFailureBeforeJoining(const ClusterConfig& config, const StrategyOptions& options,
                                                  const Status& error, std::chrono::milliseconds wait) {
  JoinAttempt().ReportFailure(config, options, error, wait);
}

Status MirroredStrategy::CreateNcclReplicas(const std::string& unique_id) {
#if MIRRORED_WITH_CUDA
  NcclReplicaGroupOptions o;
  o.unique_id = unique_id;
  o.world_size = world_size_;
  o.rank_offset = rank_offset_;
  o.devices = devices_.gpus;
  o.timeout = options_.collective_timeout;
  o.init_timeout = options_.registration_timeout;
  MIRRORED_LOG(INFO) << "collectives (NCCL): ranks " << rank_offset_ << "-" << rank_offset_ + local_replicas_ - 1
                     << " of " << world_size_ << " on " << devices_.Describe();
  // As for Gloo's connect: a peer failing during the init must not leave
  // this task waiting out init_timeout (OnJobError exits after the grace).
  SetBusy(true);
  auto group = NcclReplicaGroup::Create(std::move(o));
  SetBusy(false);
  if (!group.ok()) {
    if (Status e = job_error(); !e.ok()) return e;
    return group.status();
  }
  (*group)->replica(0).CountStartedOperations(collectives_started_);  // reported with the heartbeats
  std::lock_guard<std::mutex> lock(mu_);
  replicas_ = std::move(group).value();
  return OkStatus();
#else
  (void)unique_id;
  return FailedPreconditionError("GPU replicas need a build with CUDA (MIRRORED_WITH_CUDA=OFF)");
#endif
}

}  // namespace mirrored
