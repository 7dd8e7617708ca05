// SimulatedJob: thousands of lightweight simulated tasks driving a real
// CoordinationService in process, through the calls its gRPC handler makes
// (RegisterTaskAsync, PollForErrorAsync, Heartbeat, BarrierAsync,
// ShutdownTaskAsync), with no gRPC and no thread per task. It measures what
// the service itself costs per phase at a scale (16,384 tasks) that real
// agents, three threads each, cannot reach on one machine. Used by
// coordination_scale_test and service_bench; not part of the worker.
//
//   auto job = SimulatedJob::Create({.tasks = 16384});
//   MIRRORED_RETURN_IF_ERROR((*job)->Form());            // register + rank + NCCL id
//   MIRRORED_RETURN_IF_ERROR((*job)->OpenErrorPolls());
//   MIRRORED_RETURN_IF_ERROR((*job)->PassBarrier("step/1"));
//   (*job)->StartHeartbeats(/*silent_task=*/7);         // task 7 freezes
//   auto told = (*job)->WaitForErrorEverywhere(kBound);  // every task learns it
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/coordination/coordination_service.h"

namespace mirrored::coordination {

struct SimulatedJobOptions {
  int tasks = 1024;  // chief:0, then worker:0 ... worker:<tasks-2>
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(5);  // the service's (--heartbeat-timeout)
  std::chrono::milliseconds heartbeat_interval =
      std::chrono::seconds(1);  // every simulated task's, as the agent's default
  std::chrono::milliseconds check_interval = std::chrono::milliseconds(100);  // the service's deadline thread
};

// The CPU milliseconds each phase took on the calling thread
// (CLOCK_THREAD_CPUTIME_ID: the service's own work in those calls, not time
// this thread spent preempted on a loaded machine), and forming's wall time.
struct SimulatedJobTimes {
  double create_ms = 0;             // CoordinationService::Create: the task table
  double register_ms = 0;           // the first N-1 registrations, each left pending
  double last_registration_ms = 0;  // the call that forms the job: ranks, NCCL id, every answer
  double answers_ms = 0;            // within it: from the first task answered to the last
  double polls_ms = 0;              // N error polls opened
  double barrier_ms = 0;            // N barrier arrivals, the last releasing all
  double heartbeat_round_ms = 0;    // the latest round of N heartbeats
  double exit_barrier_ms = 0;       // N exit-barrier arrivals
  double form_wall_ms = 0;          // Form() from its start to the last answer, wall clock
};

class SimulatedJob {
 public:
  using Clock = std::chrono::steady_clock;

  // Errors: as CoordinationService::Create.
  static StatusOr<std::unique_ptr<SimulatedJob>> Create(SimulatedJobOptions options);
  ~SimulatedJob();  // stops the heartbeats, then the service

  // Every task registers (the last one forms the job). Errors: a task not
  // answered, answered an error, or given another view or index than its own.
  Status Form();
  // Every task opens its error poll (as Connect() does before it returns).
  Status OpenErrorPolls();
  // Every task arrives at barrier `name`. Errors: a task not answered OK once
  // the last arrived.
  Status PassBarrier(const std::string& name);
  // One heartbeat from every task but `silent_task` (-1: none). Errors: the
  // first heartbeat refused.
  Status HeartbeatRound(int silent_task = -1);
  // A thread sends a HeartbeatRound every heartbeat_interval, leaving out
  // `silent_task` (a frozen task), until StopHeartbeats().
  void StartHeartbeats(int silent_task = -1);
  void StopHeartbeats();
  // Waits (up to `timeout`) until every task's error poll was answered;
  // returns when the last one was. Errors: DeadlineExceeded naming how many
  // were not answered; FailedPrecondition when an answer is not Aborted
  // naming `failed_task`.
  StatusOr<Clock::time_point> WaitForErrorEverywhere(const std::string& failed_task,
                                                     std::chrono::milliseconds timeout);
  // Every task enters the exit barrier. Errors: a task not answered OK.
  Status ShutdownAll();

  CoordinationService& service() { return *service_; }
  const std::string& task_name(int index) const { return names_[static_cast<size_t>(index)]; }
  int tasks() const { return static_cast<int>(names_.size()); }
  const SimulatedJobTimes& times() const { return times_; }

 private:
  SimulatedJob(SimulatedJobOptions options, std::vector<std::string> names);
  static uint64_t Incarnation(int index) { return static_cast<uint64_t>(index) + 1; }
  void HeartbeatLoop(int silent_task);

  const SimulatedJobOptions options_;
  const std::vector<std::string> names_;
  std::unique_ptr<CoordinationService> service_;
  SimulatedJobTimes times_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<Status>> poll_answers_;
  int polls_answered_ = 0;
  Clock::time_point last_poll_answer_;
  bool stop_heartbeats_ = false;
  std::thread heartbeat_thread_;
};

}  // namespace mirrored::coordination
