// CoordinationService logic with no network, for a process registering as
// a task that another process holds: a second process from another host is
// refused alone, one from the task's host waits a heartbeat timeout (its
// waiting slots bounded), a claim after the task went silent is a restart,
// and a restarted task fails the job. A fake clock drives every deadline.
#include "worker/coordination/coordination_service.h"

#include <gtest/gtest.h>

#include <optional>

#include "tests/coordination/coordination_service_test_util.h"

namespace mirrored::coordination {
namespace {

// A second process claiming a task that runs, from another host, while that
// task heartbeats: refused alone (exit 2), the job goes on. The same claim
// once the task has gone silent, or from the task's own host, is a restart.
TEST_F(CoordinationServiceTest, ASecondProcessClaimingARunningTaskFromAnotherHostIsRefusedAlone) {
  auto s = TwoHostsRegistered();
  ASSERT_FALSE(HasFailure());
  now_ += 500;
  ASSERT_TRUE(s->Heartbeat("worker:0", 2).ok());
  std::optional<StatusOr<RegisteredView>> second;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 3, .device_count = 1, .peer = "ipv4:10.0.0.3:40002"},
                       [&](const auto& v) { second = v; });
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->status().code(), StatusCode::kInvalidArgument) << second->status();
  EXPECT_NE(second->status().message().find("task worker:0 is already running, registered from 10.0.0.2 (its last "
                                            "heartbeat 0 ms ago); this second process claiming it, "
                                            "from 10.0.0.3, "
                                            "is refused"),
            std::string::npos)
      << second->status();
  EXPECT_TRUE(s->Heartbeat("worker:0", 2).ok());  // the job goes on
  EXPECT_TRUE(s->Heartbeat("chief:0", 1).ok());

  // From its own host while its process holds its error poll open: not a
  // launcher's restart is told to wait (the old process may be stopping),
  // and refused once the old one stayed alive a heartbeat timeout (1000 ms
  // here) after that first answer; a launcher's restart fails the job.
  std::optional<Status> polled;
  s->PollForErrorAsync("worker:0", 2, [&](const Status& e) { polled = e; });
  auto claim = [&](uint64_t incarnation) {
    std::optional<StatusOr<RegisteredView>> answer;
    s->RegisterTaskAsync(
        {.task = "worker:0", .incarnation = incarnation, .device_count = 1, .peer = "ipv4:10.0.0.2:40003"},
        [&](const auto& v) { answer = v; });
    EXPECT_TRUE(answer.has_value());
    return answer ? answer->status() : InternalError("no answer");
  };
  for (int i = 0; i < 2; ++i) {
    const Status waiting = claim(4);
    EXPECT_EQ(waiting.code(), StatusCode::kUnavailable) << waiting;
    EXPECT_NE(waiting.message().find(kPreviousProcessStillRunning), std::string::npos) << waiting;
    now_ += 600;
    ASSERT_TRUE(s->Heartbeat("worker:0", 2).ok());
    ASSERT_TRUE(s->Heartbeat("chief:0", 1).ok());
  }
  const Status refused = claim(4);  // 1200 ms after its first answer
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("task worker:0 is still running: its process on 10.0.0.2 kept heartbeating and "
                                   "stayed connected for the 1200 ms this second process waited"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("stop the other process running it on 10.0.0.2"), std::string::npos) << refused;
  EXPECT_FALSE(polled.has_value());
  std::optional<StatusOr<RegisteredView>> restarted;
  s->RegisterTaskAsync(
      {.task = "worker:0", .incarnation = 5, .device_count = 1, .peer = "ipv4:10.0.0.2:40003", .restarted = true},
      [&](const auto& v) { restarted = v; });
  ASSERT_TRUE(restarted.has_value());
  EXPECT_EQ(restarted->status().code(), StatusCode::kAborted) << restarted->status();
  EXPECT_NE(restarted->status().message().find("restarted with a new incarnation"), std::string::npos)
      << restarted->status();
}

// Two second processes of a running task from its host (a step started
// three times) asking in turn: each waits one heartbeat timeout (1000 ms
// here) from its own first answer, then is refused (exit 2). With one
// waiting slot per task they restarted each other's wait, were told to wait
// until their registration timeout, and exited 1 with the "wait" message.
TEST_F(CoordinationServiceTest, TwoSecondProcessesOfARunningTaskEachWaitTheirOwnHeartbeatTimeout) {
  auto s = RunningJob();
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 3)));
  Pass(*s, 300);
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 4)));
  Pass(*s, 300);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 3)));
    EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 4)));
    Pass(*s, 300);
  }
  EXPECT_EQ(s->waiting_claims("worker:0"), 2u);
  // 1200 ms after 3's first answer, 900 ms after 4's.
  const Status refused = ClaimWorker0(*s, 3);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("kept heartbeating and stayed connected for the 1200 ms this second process "
                                   "waited"),
            std::string::npos)
      << refused;
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 4)));
  EXPECT_EQ(s->waiting_claims("worker:0"), 1u);
  Pass(*s, 300);
  EXPECT_EQ(ClaimWorker0(*s, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->waiting_claims("worker:0"), 0u);
  EXPECT_FALSE(s->job_error().has_value());
  EXPECT_EQ(s->task_state("worker:0"), TaskState::kConnected);
}

// The processes waiting for one task are bounded: past 16, a newcomer is
// refused at once; one that stopped asking (10 s) is forgotten, freeing its
// place, and a refused one is forgotten too (asking again, it waits anew).
TEST_F(CoordinationServiceTest, TheProcessesWaitingForATaskAreBounded) {
  auto s = RunningJob();
  for (uint64_t incarnation = 100; incarnation < 116; ++incarnation) {
    EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, incarnation))) << incarnation;
  }
  const Status seventeenth = ClaimWorker0(*s, 116);
  EXPECT_EQ(seventeenth.code(), StatusCode::kInvalidArgument) << seventeenth;
  EXPECT_NE(seventeenth.message().find("16 other processes claiming it already wait for it to end"),
            std::string::npos)
      << seventeenth;
  Pass(*s, 1000);
  EXPECT_EQ(ClaimWorker0(*s, 100).code(), StatusCode::kInvalidArgument);  // its wait is over
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 116)));                        // in 100's place
  EXPECT_EQ(ClaimWorker0(*s, 117).code(), StatusCode::kInvalidArgument);
  for (int i = 0; i < 21; ++i) Pass(*s, 500);  // the waiting ones went away
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 117)));
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 100)));
  EXPECT_FALSE(s->job_error().has_value());
}

// The job ends cleanly while a second process waits for the task's process
// (a Ctrl-C stops the job after a step, through its exit barrier): the
// newcomer is told the job has ended (exit 2), and the exit barrier still
// passes. Taken for a restart, it failed the job in its exit barrier (exit
// 3 everywhere); asking after the service stopped, it was told only
// "stopped" and registered until its deadline (exit 4).
TEST_F(CoordinationServiceTest, ASecondProcessWaitingWhenTheJobEndsIsToldItHasEnded) {
  auto s = RunningJob();
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*s, 3)));
  std::optional<Status> worker_exit, chief_exit;
  s->ShutdownTaskAsync("worker:0", 2, [&](const Status& st) { worker_exit = st; });
  const Status ending = ClaimWorker0(*s, 3);
  EXPECT_EQ(ending.code(), StatusCode::kInvalidArgument) << ending;
  EXPECT_NE(ending.message().find("task worker:0: the job that ran it has ended: its process on 10.0.0.2 reached "
                                  "the exit barrier (the job finished, or stopped on a signal), while this second "
                                  "process waited for the task's process to end; this process claiming it, from "
                                  "10.0.0.2, has no job to join"),
            std::string::npos)
      << ending;
  s->ShutdownTaskAsync("chief:0", 1, [&](const Status& st) { chief_exit = st; });
  ASSERT_TRUE(worker_exit && chief_exit);
  EXPECT_TRUE(worker_exit->ok()) << *worker_exit;
  EXPECT_TRUE(chief_exit->ok()) << *chief_exit;
  EXPECT_FALSE(s->job_error().has_value());
  EXPECT_EQ(ClaimWorker0(*s, 4).code(), StatusCode::kInvalidArgument);  // after it, too

  auto stopping = RunningJob();
  EXPECT_TRUE(ToldToWait(ClaimWorker0(*stopping, 3)));
  stopping->Stop();
  const Status stopped = ClaimWorker0(*stopping, 3);
  EXPECT_EQ(stopped.code(), StatusCode::kInvalidArgument) << stopped;
  EXPECT_NE(stopped.message().find("the job that ran it has ended: its coordination service stopped (the chief is "
                                   "shutting down), while this second process waited"),
            std::string::npos)
      << stopped;
  EXPECT_EQ(ClaimWorker0(*stopping, 4).code(), StatusCode::kUnavailable);  // never told to wait: as before
}

// Before the job forms, where the cluster lists the task's IP: the process
// registered from that IP is the task, a second one from elsewhere is
// refused and the first still joins. Where it lists a name, the newcomer
// replaces it (a restart cannot be told apart).
TEST_F(CoordinationServiceTest, BeforeTheJobFormsAClaimFromAnotherHostThanTheListedIpIsRefused) {
  CoordinationServiceOptions o;
  o.tasks = {"chief:0", "worker:0", "worker:1"};
  o.task_hosts = {"10.0.0.1", "10.0.0.2", "host3"};
  o.make_nccl_unique_id = []() -> StatusOr<std::string> { return std::string(128, 'x'); };
  auto s = CoordinationService::Create(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<StatusOr<RegisteredView>> chief, real, impostor, w1;
  (*s)->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1, .peer = "ipv4:10.0.0.1:40000"},
                          [&](const auto& v) { chief = v; });
  (*s)->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1, .peer = "ipv4:10.0.0.2:40001"},
                          [&](const auto& v) { real = v; });
  (*s)->RegisterTaskAsync({.task = "worker:0", .incarnation = 3, .device_count = 1, .peer = "ipv4:10.0.0.1:40002"},
                          [&](const auto& v) { impostor = v; });
  ASSERT_TRUE(impostor.has_value());
  EXPECT_EQ(impostor->status().code(), StatusCode::kInvalidArgument) << impostor->status();
  EXPECT_NE(impostor->status().message().find("task worker:0 is already registered from 10.0.0.2, its address in "
                                              "the cluster; this second process claiming it, from 10.0.0.1, is "
                                              "refused"),
            std::string::npos)
      << impostor->status();
  EXPECT_FALSE(real.has_value());  // still waiting for the job to form
  (*s)->RegisterTaskAsync({.task = "worker:1", .incarnation = 4, .device_count = 1, .peer = "ipv4:10.0.0.3:40003"},
                          [&](const auto& v) { w1 = v; });
  ASSERT_TRUE(real.has_value() && real->ok() && chief.has_value() && chief->ok() && w1.has_value() && w1->ok());

  // worker:1 is listed by name: a second claim replaces the first.
  CoordinationServiceOptions named;
  named.tasks = {"chief:0", "worker:0"};
  named.task_hosts = {"10.0.0.1", "host2"};
  named.make_nccl_unique_id = []() -> StatusOr<std::string> { return std::string(128, 'x'); };
  auto n = CoordinationService::Create(std::move(named));
  ASSERT_TRUE(n.ok()) << n.status();
  std::optional<StatusOr<RegisteredView>> first, second, named_chief;
  (*n)->RegisterTaskAsync({.task = "worker:0", .incarnation = 4, .device_count = 1, .peer = "ipv4:10.0.0.3:40003"},
                          [&](const auto& v) { first = v; });
  (*n)->RegisterTaskAsync({.task = "worker:0", .incarnation = 5, .device_count = 1, .peer = "ipv4:10.0.0.4:40004"},
                          [&](const auto& v) { second = v; });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status().code(), StatusCode::kAborted) << first->status();
  EXPECT_NE(first->status().message().find("superseded by a newer process claiming it from 10.0.0.4"),
            std::string::npos)
      << first->status();
  (*n)->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1, .peer = "ipv4:10.0.0.1:40000"},
                          [&](const auto& v) { named_chief = v; });
  ASSERT_TRUE(second.has_value() && second->ok() && named_chief.has_value() && named_chief->ok());
}

TEST_F(CoordinationServiceTest, AClaimFromAnotherHostAfterTheTaskWentSilentIsARestart) {
  auto s = TwoHostsRegistered();
  ASSERT_FALSE(HasFailure());
  now_ += 2500;  // a pod on a dead node, rescheduled elsewhere
  std::optional<StatusOr<RegisteredView>> moved;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 3, .device_count = 1, .peer = "ipv4:10.0.0.9:40002"},
                       [&](const auto& v) { moved = v; });
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->status().code(), StatusCode::kAborted) << moved->status();
}

TEST_F(CoordinationServiceTest, RestartedTaskFailsTheJob) {
  auto s = Make({"chief:0", "worker:0"});
  auto views = RegisterAll(*s, {1, 1});
  ASSERT_TRUE(views[1]->ok());
  std::optional<Status> chief_poll;
  s->PollForErrorAsync("chief:0", 1, [&](const Status& st) { chief_poll = st; });
  std::optional<StatusOr<RegisteredView>> again;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 99, .device_count = 1}, [&](const auto& v) { again = v; });
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status().code(), StatusCode::kAborted);
  ASSERT_TRUE(chief_poll.has_value());
  EXPECT_EQ(chief_poll->code(), StatusCode::kAborted);
  EXPECT_NE(chief_poll->message().find("task worker:0"), std::string::npos);
  EXPECT_NE(chief_poll->message().find("restarted with a new incarnation 99"), std::string::npos);
  // The old process is stale now.
  EXPECT_EQ(s->Heartbeat("worker:0", 2).code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace mirrored::coordination
