// CoordinationAgent: one per training task; its handle on the coordination
// service — register and learn the cluster view (ranks, NCCL id), key-value
// store, barriers, heartbeats, failure notification and the exit barrier.
//
//   CoordinationAgent agent({.service_address = "10.0.0.1:2222", .task_name = "worker:0",
//                            .device_count = 2, .job_token = token});
//   MIRRORED_RETURN_IF_ERROR(agent.Connect());   // blocks until everyone registered
//   MIRRORED_RETURN_IF_ERROR(agent.Barrier("init", 60000));
//
// State machine:
//
//   kDisconnected --Connect()--> kRegistering --view received--> kConnected --Shutdown()--> kShutdown
//                                     |                              |
//                                     | registration failed          | own ReportError, a peer
//                                     v                              v failed, service lost
//                                   kError <-------------------------+
//
// Once connected, two threads run: a heartbeat every heartbeat_interval,
// and a long poll on which the service reports the job error. When an error
// arrives (or the service is lost or silent for heartbeat_timeout) the
// agent enters kError, runs the error callback once (so communicators can
// abort), and every blocked or later call returns that error: Aborted naming
// the failed task, what happened and when (exit code 3).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/coordination/cluster_view.h"
#include "worker/coordination/coordination_client.h"
#include "worker/coordination/tls_probe.h"

namespace mirrored::coordination {

struct CoordinationAgentOptions {
  std::string service_address;     // "host:port" of the chief's service
  std::string task_name;           // "worker:1"
  int device_count = 1;            // local GPUs or CPU replicas
  bool gpu = false;                // they are GPUs: the job needs a real NCCL id
  std::string job_token;           // MIRRORED_JOB_TOKEN
  std::string service_task;        // task hosting the service, for messages ("chief:0")
  std::string cluster;             // RegisterRequest.cluster: this task's view of the job ("": not checked)
  std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(1);
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(5);  // service silent this long = lost
  std::chrono::milliseconds registration_timeout = std::chrono::minutes(5);
  // A restarted task (its launcher's restart of a failed job): a Register
  // answered Aborted (the job failed), Unavailable or Cancelled (the service
  // stopped under the call) comes from the chief's service of the generation that
  // failed, still running for a moment (a peer's launcher restarts this task
  // before the old chief has exited). Such a task keeps registering, with
  // backoff, until registration_timeout, and meets the chief's next
  // service. A first-run task fails at once instead (exit 3).
  bool restarted = false;
  // Checked while registering (true cancels the call: Cancelled), while a
  // restarted task waits out the failed generation (true ends the wait
  // with the old service's Aborted), and while this process waits for the
  // task's previous process on this host to end (true ends it: Cancelled),
  // e.g. when SIGTERM says the launcher or the scheduler is stopping this
  // task (mirrored-worker then exits 143). Empty: never.
  std::function<bool()> stop_waiting;
  std::chrono::milliseconds rpc_timeout = std::chrono::seconds(10);       // calls that do not wait (set, heartbeat)
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(60);  // exit barrier
  // TLS to the service (default: plaintext), and the name its certificate
  // must carry when not the host of service_address (see MakeChannel).
  TlsCredentials tls;
  std::string tls_server_name;
  // Use this channel instead of opening one (e.g. many agents in one process).
  std::shared_ptr<grpc::Channel> channel;
  // The clock by which the agent tells that its own process did not run
  // (a seam for tests); empty: CLOCK_BOOTTIME (which counts a suspend).
  std::function<std::chrono::steady_clock::time_point()> clock;
  // How many collectives this task has started (its first replica's), sent
  // with every heartbeat for Progress(); null: 0.
  std::shared_ptr<const std::atomic<uint64_t>> collectives_started;
  // The launcher's liveness pipe (LauncherLivenessFd(); -1: none): a byte
  // every heartbeat round (none with rounds over 10 s apart), "S" when the
  // rounds end.
  int liveness_fd = -1;
};

class CoordinationAgent {
 public:
  enum class State { kDisconnected, kRegistering, kConnected, kError, kShutdown };
  using ErrorCallback = std::function<void(const Status&)>;

  explicit CoordinationAgent(CoordinationAgentOptions options);
  // Stops the threads and cancels in-flight calls; no exit barrier (a task
  // destroyed without Shutdown() while connected is seen as lost).
  ~CoordinationAgent();

  // Runs once, on an agent thread, when the agent enters kError. Set it
  // before Connect(). It may abort communicators or exit the process, but
  // must not call Shutdown() or destroy the agent (it runs on its thread).
  void SetErrorCallback(ErrorCallback callback);

  // Registers, waits for every task, and returns once the service holds this
  // task's error poll (so its death is noticed at once). A first-run process
  // claiming a task whose process on this host still runs (the service says
  // kPreviousProcessStillRunning) registers again, with backoff, until that
  // process ends (then Aborted: the task failed) or the service refuses the
  // claim. Errors: FailedPrecondition (not kDisconnected); DeadlineExceeded
  // (the service named the missing tasks, or it was unreachable for
  // registration_timeout); Unauthenticated; InvalidArgument (unknown task
  // name, a cluster other than the chief's, or a second process claiming a
  // running task: from another host at once, from this host once the task's
  // process kept running a heartbeat timeout, or registration_timeout if
  // shorter, or once the job ended or its service went silent for
  // heartbeat_timeout while it waited); Aborted (the job already
  // failed; a restarted task instead waits, see `restarted`, and ends with
  // DeadlineExceeded naming the failed generation); Cancelled
  // (`stop_waiting` said so, or the agent is being destroyed); Unavailable
  // (the service stopped, or the error poll did not open within
  // rpc_timeout).
  Status Connect();
  // Valid after a successful Connect().
  const ClusterView& cluster_view() const { return view_; }
  int task_index() const { return task_index_; }
  uint64_t incarnation() const { return incarnation_; }

  // Errors of every call below: FailedPrecondition (not connected) or the
  // agent's error (Aborted: a peer failed; Unavailable) — plus those listed.
  // InvalidArgument (bad key); AlreadyExists (set, allow_overwrite false).
  Status KeyValueSet(const std::string& key, const std::string& value,
                     bool allow_overwrite = false);
  // Waits up to timeout_ms for the key. DeadlineExceeded naming the key.
  StatusOr<std::string> KeyValueGet(const std::string& key, int64_t timeout_ms);
  // NotFound when absent.
  StatusOr<std::string> KeyValueTryGet(const std::string& key);
  // DeadlineExceeded naming the missing keys.
  Status WaitForKeys(const std::vector<std::string>& keys, int64_t timeout_ms);
  // DeadlineExceeded naming the tasks that did not arrive.
  Status Barrier(const std::string& name, int64_t timeout_ms);
  // Every training task's collective count as of its last heartbeat (the
  // service's view; see CoordinationService::Progress).
  StatusOr<rpc::ProgressResponse> Progress();

  // This task failed: tells the service (so every peer learns it) and enters
  // kError with `error`. Returns the RPC's status.
  Status ReportError(const Status& error);
  // Tells the service only, leaving this agent as it is (its own echo of the
  // error is ignored): for a process about to end by itself, such as by a
  // SIGINT, whose work must not be aborted (and exit otherwise) first.
  Status TellFailure(const Status& error);

  // Exit barrier, then stops the threads. OK: every task finished.
  // DeadlineExceeded naming the tasks still running; the agent's error.
  Status Shutdown();

  State state() const;
  // The error that put the agent in kError (OK otherwise).
  Status error() const;

 private:
  // Checks kConnected; otherwise the error to return.
  Status CheckConnected() const;
  // After a failed call: the agent's error if it has one; a call that could
  // not reach the service (Unavailable, Cancelled) puts the agent in kError
  // as "service lost"; else `call_status`.
  Status Explain(const Status& call_status);
  Status ServiceLost(const Status& cause) const;
  // Enters kError (first error wins), cancels in-flight calls, runs the callback.
  void SetError(const Status& error);
  // Register, retried past the failed generation's service (`restarted`),
  // and while the service says the task's previous process still runs.
  // One Register call, cancelled when options_.stop_waiting says so
  // (*stopped set, Cancelled returned).
  // (or, when TLS is on at one end only or refuses a certificate, the
  // error that says so).
  StatusOr<rpc::RegisterResponse> RegisterUnlessStopped(const rpc::RegisterRequest& req, int64_t timeout_ms,
                                                        bool* stopped);
  // What the channel's failing connection says of TLS (tls_probe.h).
  HandshakeVerdict CheckHandshake();
  StatusOr<rpc::RegisterResponse> RegisterPastFailedGeneration(const rpc::RegisterRequest& req);
  // RegisterPastFailedGeneration's state from one call to the next.
  struct RegisterRetry {
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds pause;          // before the next call
    int tries = 0;                            // calls so far that led to a pause
    std::optional<Status> failed_generation;  // what the old service last said
    bool claim_waiting = false;               // told to wait for the task's previous process
  };
  // Told to wait for the task's previous process, then `answer` (the
  // service unreachable): the error to end with.
  Status ClaimWaitEnded(const Status& answer, std::chrono::steady_clock::time_point deadline);
  // Told to wait for the task's previous process: pauses, then nullopt to
  // register again, or the error to end with.
  std::optional<Status> WaitForPreviousProcess(const Status& answer, RegisterRetry& retry);
  // A restarted task refused by `answer`: when it is the failed generation's
  // service, pauses and returns nullopt to register again; else the error
  // to end with.
  std::optional<Status> WaitForNextGeneration(const Status& answer, RegisterRetry& retry);
  // Waits `pause` (not past `deadline`) before registering again; false
  // when the agent stopped meanwhile.
  bool WaitBeforeRegisteringAgain(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds pause);
  void HeartbeatLoop();
  void PollLoop();
  std::chrono::steady_clock::time_point Clock() const;
  // How long the heartbeat thread has not begun a round, when that is past
  // what one round can take (its wait, then a heartbeat call bounded by the
  // heartbeat timeout): this process did not run (SIGSTOP, a suspended
  // machine, starved of CPU), and the service has most likely declared it
  // failed; or such a freeze was found within the last round limit (the
  // failures it caused surface just after it).
  // nullopt otherwise.
  std::optional<int64_t> FrozenForMs() const;
  // This task's own failure (Unavailable: exit 1) for a freeze of `ms`,
  // with the error it met after it (`cause`).
  Status FrozenError(int64_t ms, const Status& cause) const;
  // The service's job error names this very task ("task <it> failed at ...").
  bool AboutThisTask(const Status& s) const;
  void StopThreads();
  std::string ServiceName() const;

  const CoordinationAgentOptions options_;
  const uint64_t incarnation_;
  CoordinationClient client_;
  ClusterView view_;
  int task_index_ = -1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kDisconnected;
  Status error_;
  bool stopping_ = false;
  bool poll_open_ = false;  // the service holds this task's error poll
  bool reporting_ = false;  // ReportError is sending this task's own error
  ErrorCallback error_callback_;
  std::thread heartbeat_thread_;
  std::thread poll_thread_;
  // Clock() when the heartbeat thread last began a round, in ns.
  std::atomic<int64_t> heartbeat_round_ns_{0};
  // The last freeze that thread found (ms) and when (Clock() ns; 0: none).
  std::atomic<int64_t> freeze_ms_{0};
  std::atomic<int64_t> freeze_seen_ns_{0};
};

std::string_view AgentStateName(CoordinationAgent::State state);

}  // namespace mirrored::coordination
