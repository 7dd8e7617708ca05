// MirroredStrategy: running the replicas (one thread each, their errors,
// the job error's abort), and leaving the job. How a task joins it is in
// mirrored_strategy_join.cc.
#include "worker/strategy/mirrored_strategy.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <sstream>
#include <system_error>
#include <thread>

#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_client.h"
#include "worker/coordination/coordination_gloo_store.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/strategy/replicas_result.h"
#include "worker/strategy/settings_agreement.h"
#include "worker/strategy/tasks_behind.h"

namespace mirrored {
namespace {

// fn on one replica; an exception (the GPU backend's kernels throw
// CudaError) becomes the replica's error instead of std::terminate.
Status RunReplica(const std::function<Status(ReplicaContext&)>& fn, ReplicaContext& ctx) {
  auto who = [&ctx] {
    return "replica " + std::to_string(ctx.global_rank()) +
           (ctx.on_gpu() ? " (GPU " + std::to_string(ctx.gpu()) + ")" : std::string());
  };
  try {
    return fn(ctx);
  } catch (const std::exception& e) {
    return InternalError(who() + ": " + e.what());
  } catch (...) {
    return InternalError(who() + ": an exception that is not a std::exception");
  }
}

}  // namespace

MirroredStrategy::~MirroredStrategy() {
  LeaveJob();
  // Then the server and the service it serves.
  if (server_) server_->Stop(500);
  server_.reset();
  service_.reset();
}

void MirroredStrategy::LeaveJob() {
  // Order: communicators, then the agent (its threads may call OnJobError).
  // An OnJobError in progress holds its own reference: the group is
  // destroyed by whoever lets go last.
  std::shared_ptr<ReplicaGroup> replicas;
  std::shared_ptr<ProcessGroup> process_group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    replicas = std::move(replicas_);
    process_group = std::move(process_group_);
  }
  replicas.reset();
  process_group.reset();
  store_.reset();
  agent_.reset();
}

Status MirroredStrategy::CheckTasksAgree(const std::vector<std::pair<std::string, std::string>>& settings) {
  if (tasks_.size() < 2 || agent_ == nullptr) return OkStatus();
  const std::string prefix = "mirrored/settings/" + std::to_string(settings_checks_++) + "/";
  MIRRORED_RETURN_IF_ERROR(agent_->KeyValueSet(prefix + task_name_, SettingsJson(settings)));
  std::vector<std::map<std::string, std::string>> all;
  for (const std::string& t : tasks_) {
    MIRRORED_ASSIGN_OR_RETURN(std::string text, agent_->KeyValueGet(prefix + t, options_.registration_timeout.count()));
    all.push_back(ParseSettingsJson(text));
  }
  const std::string differences = SettingsDifferences(settings, tasks_, all);
  if (differences.empty()) return OkStatus();
  // Everyone has read every task's settings before anyone leaves (see
  // CheckSameDeviceKind, also for why the barrier's result is not returned).
  (void)agent_->Barrier(prefix + "checked", options_.registration_timeout.count());
  return InvalidArgumentError("tasks disagree on the job's settings: " + differences +
                              ". Every task must train with the same ones: start each with the same flags "
                              "(in cluster mode, compare the hosts' command lines)");
}

std::string MirroredStrategy::Describe() const {
  std::ostringstream out;
  out << world_size_ << " replica" << (world_size_ == 1 ? "" : "s") << " in sync; " << task_name_ << " runs "
      << devices_.Describe() << " (global ranks " << rank_offset_ << "-" << rank_offset_ + local_replicas_ - 1 << ")";
  return out.str();
}

void MirroredStrategy::OnJobError(const Status& error) {
  std::shared_ptr<ReplicaGroup> replicas;
  std::shared_ptr<ProcessGroup> process_group;  // kept alive: replicas->Abort() reaches it
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_error_.ok()) job_error_ = error;
    replicas = replicas_;
    process_group = process_group_;
  }
  // Aborts the NCCL communicators (ncclCommAbort) or fails the CPU barriers,
  // before RunReplicas is woken: it may return, and the group be destroyed,
  // as soon as it sees the error.
  if (replicas != nullptr) replicas->Abort(error);
  cv_.notify_all();
  // A replica blocked inside a transport call cannot be woken; do not let it
  // hold the process: wait a bounded grace for the replicas to return.
  std::unique_lock<std::mutex> lock(mu_);
  if (!busy_) return;
  if (cv_.wait_for(lock, options_.abort_grace, [&] { return !busy_; })) return;
  // program_invocation_short_name: mirrored-worker, or a user's own trainer.
  const std::string msg = std::string(program_invocation_short_name) + ": " + task_name_ + ": error: " +
                          error.message() + " (the replica threads did not return within " +
                          std::to_string(options_.abort_grace.count()) + " ms of the abort; exiting)\n";
  (void)!write(STDERR_FILENO, msg.data(), msg.size());
  _exit(ExitCodeFor(error.code() == StatusCode::kOk ? AbortedError("") : error));
}

void MirroredStrategy::SetBusy(bool busy) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = busy;
  }
  cv_.notify_all();
}

Status MirroredStrategy::job_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_error_;
}

void MirroredStrategy::TellFailureBeforeEnding(const Status& error) {
  if (!agent_) return;
  (void)agent_->TellFailure(error);
  // The chief hosts the service: its replies telling the others must leave
  // before this process ends, or they would see only a lost connection.
  if (server_) server_->Stop(/*grace_ms=*/1000);
}

void MirroredStrategy::ReportError(const Status& error) {
  // The agent then enters its error state and runs OnJobError, which aborts
  // this task's communicators too.
  if (agent_) (void)agent_->ReportError(error);
}

Status MirroredStrategy::RunReplicas(const std::function<Status(ReplicaContext&)>& fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!job_error_.ok()) return job_error_;
    busy_ = true;
  }
  std::vector<Status> results(static_cast<size_t>(local_replicas_));
  replicas_->Starting();
  std::vector<std::thread> threads;
  Status start_error;
  for (int r = 0; r < local_replicas_ && start_error.ok(); ++r) {
    try {
      threads.emplace_back([&, r] {
        const int gpu = devices_.gpu ? devices_.gpus[static_cast<size_t>(r)] : -1;
        ReplicaContext ctx(r, &replicas_->replica(r), gpu);
        // The thread's own device, once, before the replica creates anything.
        Status s = gpu >= 0 ? BindThreadToGpu(gpu) : OkStatus();
        if (s.ok()) s = RunReplica(fn, ctx);
        if (!s.ok()) replicas_->Abort(s);  // the other local replicas stop waiting
        replicas_->Returned(r);            // and do not wait for it in a later collective
        results[static_cast<size_t>(r)] = s;
      });
    } catch (const std::system_error& e) {
      // Out of threads (ulimit -u, memory): the replicas started so far
      // must not wait for the others.
      start_error = UnavailableError("cannot start the thread of local replica " + std::to_string(r) + " of " +
                                     std::to_string(local_replicas_) + ": " + e.what());
      replicas_->Abort(start_error);
    }
  }
  for (auto& t : threads) t.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  cv_.notify_all();
  if (!start_error.ok()) return start_error;
  // A lost connection usually means a peer died: the coordination service
  // knows who within its detection time. Wait (bounded) for that verdict so
  // the error names the failed task instead of blaming this one.
  const bool transport_error = std::any_of(results.begin(), results.end(), [](const Status& s) {
    return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
  });
  if (agent_ && transport_error) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, options_.heartbeat_timeout + std::chrono::seconds(1), [&] { return !job_error_.ok(); });
  }
  // A collective timed out and no task failed: say which tasks never
  // started it (they are alive: busy or stuck outside the collectives, or
  // in an earlier one), from the counts their heartbeats report.
  if (agent_ && job_error().ok()) {
    std::optional<StatusOr<coordination::rpc::ProgressResponse>> progress;  // asked once
    for (Status& s : results) {
      if (s.code() != StatusCode::kDeadlineExceeded) continue;
      if (!progress) progress = agent_->Progress();
      s = WithTasksBehind(s, *progress, task_name_);
    }
  }
  return RunReplicasResult(results, job_error());
}

Status MirroredStrategy::Shutdown() {
  if (shutdown_result_) return *shutdown_result_;  // once; later calls say how it went
  Status s = OkStatus();
  if (agent_) {
    s = agent_->Shutdown();
    if (server_) server_->Stop(2000);
  }
  shutdown_result_ = s;
  return s;
}

}  // namespace mirrored
