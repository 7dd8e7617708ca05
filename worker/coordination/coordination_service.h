// CoordinationService: the pure logic of the job's control plane — task
// registry and rendezvous (ranks, NCCL id), key-value store, named barriers,
// heartbeat staleness, failure propagation and the exit barrier. No gRPC
// here: CoordinationRpcHandler adapts it; tests drive it directly with a
// fake clock and CheckDeadlines(). Its parts: KeyValueStore, BarrierTable
// (named barriers), ExitBarrier, ErrorPollTable, JudgeTaskClaim (a claim to
// a task), RefusedCallLog (calls with a wrong job token); how the job forms
// is in coordination_service_registration.cc.
//
//   auto service = CoordinationService::Create({.tasks = {"chief:0", "worker:0"}});
//   (*service)->StartDeadlineThread();
//   (*service)->RegisterTaskAsync({.task = "worker:0", .incarnation = inc, .device_count = 2},
//                                 [](const StatusOr<RegisteredView>& v) {...});
//
// Asynchronous methods take a `done` callback that runs exactly once, never
// under the service's lock, possibly on the calling thread or on the
// deadline thread. Every wait ends: by its event, its deadline, the job
// error, or Stop().
//
// Task lifecycle on the service side:
//
//   kUnregistered --Register--> kConnected --ShutdownTask--> kShuttingDown
//        |                        |   (exit barrier)             |
//        |                        |                        all arrived
//        |                        v                              v
//        +-------------------> kFailed                        kShutdown
//     (new incarnation after rendezvous, ReportError, heartbeat timeout,
//      or its error poll cancelled = connection lost)
//
// The first failure becomes the job error; every pending and later call of
// every task then fails with it (Aborted, naming the task, what and when).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "worker/coordination/barrier_table.h"
#include "worker/coordination/cluster_view.h"
#include "worker/coordination/error_poll_table.h"
#include "worker/coordination/exit_barrier.h"
#include "worker/coordination/key_value_store.h"
#include "worker/coordination/refused_call_log.h"
#include "worker/coordination/task_claim.h"
#include "worker/coordination/task_failure.h"
#include "worker/coordination/task_state.h"

namespace mirrored::coordination {

struct CoordinationServiceOptions {
  // Training tasks in rank order: chief first, then workers by index.
  std::vector<std::string> tasks;
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(5);      // a task silent this long is failed
  std::chrono::milliseconds registration_timeout = std::chrono::minutes(5);   // from Create() until all registered
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(60);      // exit barrier, from its first arrival
  std::chrono::milliseconds check_interval = std::chrono::milliseconds(100);  // deadline thread period
  // Monotonic milliseconds; defaults to std::chrono::steady_clock.
  std::function<int64_t()> now_ms;
  // Defaults to GenerateNcclUniqueId (nccl_unique_id.h).
  std::function<StatusOr<std::string>()> make_nccl_unique_id;
  // The host of each task in `tasks` as the cluster lists it ("" unknown):
  // before the job forms, a second process claiming a task from another host
  // than the task's listed IP is refused while the one from that IP waits.
  std::vector<std::string> task_hosts;
  // The chief's cluster (RegisterRequest.cluster's form): a task that
  // registers with another one fails the registration of every task with
  // InvalidArgument naming both. "" skips the check.
  std::string cluster;
};

// One immutable view, shared by every task's answer: handing it to N
// waiters copies a pointer, not N task lists.
struct RegisteredView {
  std::shared_ptr<const ClusterView> view;
  int task_index = -1;
};

class CoordinationService {
 public:
  using StatusCallback = std::function<void(const Status&)>;
  using RegisterCallback = std::function<void(const StatusOr<RegisteredView>&)>;
  using ValueCallback = KeyValueStore::ValueCallback;

  // Errors: InvalidArgument for no tasks, a duplicate task name, or a
  // non-positive timeout.
  static StatusOr<std::unique_ptr<CoordinationService>> Create(CoordinationServiceOptions options);
  ~CoordinationService();  // Stop()

  // Runs CheckDeadlines() every check_interval until Stop().
  void StartDeadlineThread();
  // Fails every pending call with Unavailable("coordination service stopped")
  // and stops the deadline thread. Idempotent.
  void Stop();

  // Completes once every task has registered: with the view (same for all).
  // Errors: InvalidArgument (unknown task, device_count < 1);
  // DeadlineExceeded naming the missing tasks after registration_timeout;
  // Aborted with the job error (including: this task re-registered with a
  // new incarnation after rendezvous, which fails the job as "restarted");
  // Internal when the NCCL id cannot be made; Unavailable after Stop().
  // A second process claiming a running task from another host while the
  // task's process is alive (a heartbeat within 2 s) is refused alone
  // (InvalidArgument), not taken for that task's restart. From the same host
  // without being a launcher's restart while the task's process is alive
  // (also its error poll open), it is told Unavailable with
  // kPreviousProcessStillRunning (the agent retries: the old process may be
  // stopping, as after a Ctrl-C and an immediate re-run), and refused
  // (InvalidArgument) only once the old process stayed alive for
  // heartbeat_timeout after that newcomer's own first answer (each
  // newcomer waits on its own; past 16 waiting at once, one is refused at
  // once). A claim that is not a launcher's restart on a task in or past
  // its exit barrier, or after Stop() from a newcomer told to wait, is
  // refused (InvalidArgument: the job that ran the task has ended; or, after
  // Stop(), the job error if the job failed), and the exit barrier goes on.
  // A task whose cluster differs from the chief's fails registration for
  // every task (InvalidArgument).
  struct Registration {
    std::string task = {};     // "worker:1"
    uint64_t incarnation = 0;  // this process's, new on every start
    int device_count = 1;      // its replicas
    std::string cluster = {};  // the training tasks its TF_CONFIG lists, "chief:0, worker:0" ("": not compared)
    std::string peer = {};     // gRPC's name of the caller, "ipv4:10.0.0.2:41234" ("": unknown, in tests)
    bool restarted = false;    // started again by its launcher: the task's earlier process has ended
    bool gpu = false;          // its replicas are GPUs (the job then needs a real NCCL id)
  };
  void RegisterTaskAsync(const Registration& registration, RegisterCallback done);

  // Errors: InvalidArgument (unknown task); FailedPrecondition (not
  // registered); Aborted (the job error; or the caller's incarnation is
  // stale, i.e. another process took its place).
  // `collectives`: how many collectives the task has started (see
  // Progress); 0 when unknown.
  Status Heartbeat(const std::string& task, uint64_t incarnation, uint64_t collectives = 0);

  // Every training task's last reported collective count, and how long ago
  // it heartbeat and its count last changed (in task order).
  struct TaskProgress {
    std::string task;
    uint64_t collectives = 0;
    int64_t ms_since_heartbeat = 0;
    int64_t ms_since_progress = 0;
  };
  std::vector<TaskProgress> Progress() const;

  // Long poll: `done` gets the job error (Aborted) when any task fails, or OK
  // once the exit barrier completes. Returns a poll id for CancelPoll.
  // Errors: as Heartbeat.
  uint64_t PollForErrorAsync(const std::string& task, uint64_t incarnation, StatusCallback done);
  // The poll's caller went away. Unless its task is shutting down (or the
  // service stops), that task is failed as "connection lost". `done` of the
  // poll runs with Cancelled. Unknown or finished ids are ignored.
  void CancelPoll(uint64_t poll_id);

  // The task reports its own failure; it becomes the job error if it is the
  // first. A task that failed before registering reports with incarnation
  // kBeforeJoining: while the job has not formed, that fails it too, so the
  // others stop waiting for it. Errors: InvalidArgument (unknown task).
  static constexpr uint64_t kBeforeJoining = 0;
  Status ReportError(const std::string& task, uint64_t incarnation, const Status& error);

  // Key-value store; errors as KeyValueStore, plus Aborted (the job error)
  // for waits. timeout_ms <= 0 for KeyValueGetAsync means "do not wait"
  // (NotFound when absent).
  Status KeyValueSet(const std::string& key, std::string value, bool allow_overwrite);
  void KeyValueGetAsync(const std::string& key, int64_t timeout_ms, ValueCallback done);
  void WaitForKeysAsync(std::vector<std::string> keys, int64_t timeout_ms, StatusCallback done);

  // Named barrier over all training tasks. The first arrival fixes its
  // deadline (now + timeout_ms); once everyone arrived the name is free for
  // reuse. Errors: InvalidArgument (unknown task, empty name, timeout <= 0);
  // DeadlineExceeded naming the tasks that did not arrive; Aborted at once
  // when any task has failed.
  void BarrierAsync(const std::string& name, const std::string& task, uint64_t incarnation,
                    int64_t timeout_ms, StatusCallback done);

  // Exit barrier: the task is done and is no longer watched for heartbeats
  // or connection loss. OK once every task arrived.
  // Errors: DeadlineExceeded naming the tasks still running after
  // shutdown_timeout; Aborted (the job error); InvalidArgument.
  void ShutdownTaskAsync(const std::string& task, uint64_t incarnation, StatusCallback done);

  // A call refused for a missing or wrong job token, from `peer` (gRPC's
  // "ipv4:10.0.0.2:41234"): the first from each host is logged, and a
  // registration timeout names them, since a host started with another
  // token looks from here like a host that never started.
  void NoteRefusedCall(const std::string& peer);

  // Heartbeat staleness and every deadline (registration, barriers, key-value
  // waits, exit barrier) against now_ms().
  void CheckDeadlines();
  // The deadline thread's round: CheckDeadlines, unless this round comes far
  // later than the one at `previous_round_ms` (this process did not run:
  // the chief stopped, suspended or starved); then the tasks' silence is its
  // own, and their heartbeats are counted afresh first. Returns now_ms().
  int64_t CheckDeadlinesAfter(int64_t previous_round_ms);

  // Blocks until every training task knows why the job failed to form (it
  // failed itself, or its registration was answered with the job error or
  // the registration error) or `timeout` passes (real time). For a chief
  // whose join failed before the job formed (its own error before joining,
  // a task started with another cluster): it keeps serving that error to
  // the tasks still to register, then exits. Returns the tasks not told: {}
  // with nothing to tell (no error; the job formed, so every task's error
  // poll tells it; the registration timed out, so the tasks missing are its
  // cause: they did not come within the registration timeout).
  std::vector<std::string> WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds timeout);

  // Error polls now open: the tasks watched for connection loss.
  size_t open_error_polls() const;
  // Second processes claiming `task` that were told to wait for its process
  // to end (kPreviousProcessStillRunning) and are not refused or forgotten
  // yet.
  size_t waiting_claims(const std::string& task) const;
  // The first task failure, if any.
  std::optional<Status> job_error() const;
  TaskState task_state(const std::string& task) const;
  const CoordinationServiceOptions& options() const { return options_; }

 private:
  struct WaitingClaim {
    int64_t first_told_ms = 0;  // when it was first told to wait
    int64_t last_asked_ms = 0;  // its latest registration
  };
  struct Task {
    std::string name;
    TaskState state = TaskState::kUnregistered;
    uint64_t incarnation = 0;
    int device_count = 0;
    bool gpu = false;
    int64_t last_heartbeat_ms = 0;
    uint64_t collectives = 0;    // as its last heartbeat said
    int64_t progress_ms = 0;     // when `collectives` last changed
    std::string host;  // the registered process's (PeerHost), "" when unknown
    bool told_failure = false;  // a registration of it was answered with the job or registration error
    // Second processes from the task's own host, not a launcher's restart,
    // told to wait while this one is alive, by their incarnation: each one's
    // wait is its own (two duplicates asking in turn do not restart each
    // other's). Forgotten once refused, or once it stops asking.
    std::map<uint64_t, WaitingClaim> waiting_claims;
  };
  // Callbacks to run once the lock is released.
  using Deferred = std::vector<std::function<void()>>;

  explicit CoordinationService(CoordinationServiceOptions options);
  // Index of `task` in tasks_, or -1: a hash lookup, not a scan, since every
  // call names its task.
  int IndexOf(const std::string& task) const;
  // Every change of a task's state goes through here, so the count of
  // connected tasks (whether the job can form) needs no scan. Requires mu_.
  void SetStateLocked(Task& task, TaskState state);
  // InvalidArgument for an unknown task; Aborted for a stale incarnation.
  Status CheckCallerLocked(const std::string& task, uint64_t incarnation, int* index) const;
  // Marks the task failed; the first failure becomes the job error and fails
  // everything pending. Requires mu_.
  void FailTaskLocked(int index, std::string what, Deferred* deferred);
  void CompleteRegistrationLocked(Deferred* deferred);
  // The registration timeout, and the note every 30 s naming the tasks
  // still missing (CheckDeadlines). Requires mu_.
  void CheckRegistrationDeadlineLocked(int64_t now, Deferred* deferred);
  // Registration's parts (RegisterTaskAsync). A task started with another
  // cluster than the chief's: the registration error, for every task.
  Status RefuseOtherClusterLocked(const std::string& task, const std::string& cluster, int index,
                                  Deferred* deferred);
  // Task `index` as JudgeTaskClaim sees it.
  ClaimedTask ClaimedTaskLocked(int index) const;
  // JudgeTaskClaim's verdict on `registration`'s claim to task `index` (from
  // `host`) at `now`, once the claimants that stopped asking are forgotten.
  ClaimVerdict JudgeClaimLocked(int index, const Registration& registration, const std::string& host, int64_t now);
  // Before the job forms: the registrations pending for task `index` are
  // answered Aborted, superseded by a newer process (from `host`).
  void SupersedeRegistrationLocked(int index, const std::string& host, Deferred* deferred);
  // The claimant becomes task `index`; `done` waits for every task.
  void TakeTaskLocked(int index, const Registration& registration, const std::string& host, RegisterCallback done,
                      Deferred* deferred);
  // Whether the cluster lists task `index` at the IP `peer_host` (PeerHost's
  // form); false where it lists a name.
  bool ListedAt(int index, const std::string& peer_host) const;
  std::string TasksNotIn(const std::set<int>& arrived, bool skip_failed) const;
  // Unavailable: the service stopped (the chief is shutting down).
  static Status ServiceStopped();
  static void Run(Deferred& deferred);

  const CoordinationServiceOptions options_;
  KeyValueStore kv_;

  mutable std::mutex mu_;
  std::vector<Task> tasks_;
  std::unordered_map<std::string, int> index_of_;  // tasks_[i].name -> i; fixed at construction
  size_t connected_ = 0;  // tasks in TaskState::kConnected
  const int64_t registration_deadline_ms_;
  int64_t registration_note_ms_;  // when the chief last said whom it waits for
  std::vector<std::pair<int, RegisterCallback>> pending_registrations_;
  std::shared_ptr<const ClusterView> view_;  // set once everyone registered
  std::optional<Status> registration_error_;
  bool registration_timed_out_ = false;  // registration_error_ is the registration timeout
  std::optional<Status> job_error_;
  BarrierTable barriers_;
  ErrorPollTable polls_;
  ExitBarrier exit_barrier_;
  bool stopped_ = false;
  RefusedCallLog refused_calls_;

  std::condition_variable stop_cv_;
  std::condition_variable told_cv_;  // a task learned the job error
  std::thread deadline_thread_;
};

}  // namespace mirrored::coordination
