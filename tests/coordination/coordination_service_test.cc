// CoordinationService logic with no network, once the job runs: heartbeat
// timeouts, barriers, error polls, reported errors, the exit barrier and
// Stop. A fake clock drives every deadline through CheckDeadlines(). (While
// the job forms: coordination_service_registration_test.cc; a second process
// claiming a task: coordination_service_claim_test.cc.)
#include "worker/coordination/coordination_service.h"

#include <gtest/gtest.h>

#include <optional>

#include "tests/coordination/coordination_service_test_util.h"

namespace mirrored::coordination {
namespace {

// The chief's own process did not run (its deadline round comes 10 s after
// the last): the tasks' silence is not theirs, no task is failed; a task
// silent while the service runs still is.
TEST_F(CoordinationServiceTest, AServiceThatDidNotRunDoesNotBlameTheTasks) {
  auto s = Make({"chief:0", "worker:0"});
  auto views = RegisterAll(*s, {1, 1});
  ASSERT_TRUE(views[0] && views[0]->ok());
  int64_t round = s->CheckDeadlinesAfter(now_);
  now_ += 10000;
  round = s->CheckDeadlinesAfter(round);
  EXPECT_EQ(s->task_state("worker:0"), TaskState::kConnected);
  // Rounds every 100 ms from here, only the chief heartbeating.
  for (int i = 0; i < 12; ++i) {
    now_ += 100;
    EXPECT_TRUE(s->Heartbeat("chief:0", 1).ok() || i >= 10);
    round = s->CheckDeadlinesAfter(round);
  }
  EXPECT_EQ(s->task_state("worker:0"), TaskState::kFailed);
}

TEST_F(CoordinationServiceTest, HeartbeatTimeoutPropagatesToEveryone) {
  auto s = Make({"chief:0", "worker:0", "worker:1"});
  RegisterAll(*s, {1, 1, 1});
  std::optional<Status> poll0, barrier0, kv0;
  s->PollForErrorAsync("chief:0", 1, [&](const Status& st) { poll0 = st; });
  s->BarrierAsync("step", "chief:0", 1, 10000, [&](const Status& st) { barrier0 = st; });
  s->WaitForKeysAsync({"never"}, 10000, [&](const Status& st) { kv0 = st; });
  now_ = 800;
  ASSERT_TRUE(s->Heartbeat("chief:0", 1).ok());
  ASSERT_TRUE(s->Heartbeat("worker:0", 2).ok());
  now_ = 1500;  // worker:1 silent for 1500 ms, the others for 700 ms
  s->CheckDeadlines();
  for (auto* st : {&poll0, &barrier0, &kv0}) {
    ASSERT_TRUE(st->has_value());
    EXPECT_EQ((*st)->code(), StatusCode::kAborted);
    EXPECT_NE((*st)->message().find("task worker:1 failed at"), std::string::npos) << **st;
    EXPECT_NE((*st)->message().find("heartbeat timeout"), std::string::npos);
  }
  EXPECT_EQ(s->task_state("worker:1"), TaskState::kFailed);
  EXPECT_EQ(s->task_state("worker:0"), TaskState::kConnected);
  // Later calls fail at once with the same error.
  std::optional<Status> late;
  s->BarrierAsync("other", "worker:0", 2, 10000, [&](const Status& st) { late = st; });
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(*late, *poll0);
  EXPECT_EQ(s->Heartbeat("worker:0", 2), *poll0);
}

TEST_F(CoordinationServiceTest, BarrierCompletesAndIsReusable) {
  auto s = Make({"chief:0", "worker:0"});
  RegisterAll(*s, {1, 1});
  for (int round = 0; round < 2; ++round) {
    std::optional<Status> a, b;
    s->BarrierAsync("sync", "chief:0", 1, 1000, [&](const Status& st) { a = st; });
    EXPECT_FALSE(a.has_value());
    s->BarrierAsync("sync", "worker:0", 2, 1000, [&](const Status& st) { b = st; });
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(a->ok() && b->ok());
  }
}

TEST_F(CoordinationServiceTest, BarrierTimeoutNamesAbsentTasks) {
  auto s = Make({"chief:0", "worker:0", "worker:1"});
  RegisterAll(*s, {1, 1, 1});
  std::optional<Status> a;
  s->BarrierAsync("init", "chief:0", 1, 300, [&](const Status& st) { a = st; });
  s->BarrierAsync("init", "worker:1", 3, 300, [](const Status&) {});
  now_ = 300;
  s->CheckDeadlines();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(a->message().find("worker:0"), std::string::npos);
  EXPECT_EQ(a->message().find("worker:1"), std::string::npos);
}

TEST_F(CoordinationServiceTest, CancelledPollMeansConnectionLost) {
  auto s = Make({"chief:0", "worker:0"});
  RegisterAll(*s, {1, 1});
  std::optional<Status> chief_poll, worker_poll;
  s->PollForErrorAsync("chief:0", 1, [&](const Status& st) { chief_poll = st; });
  const uint64_t id = s->PollForErrorAsync("worker:0", 2, [&](const Status& st) { worker_poll = st; });
  s->CancelPoll(id);
  ASSERT_TRUE(worker_poll.has_value());
  EXPECT_EQ(worker_poll->code(), StatusCode::kCancelled);
  ASSERT_TRUE(chief_poll.has_value());
  EXPECT_NE(chief_poll->message().find("task worker:0 failed"), std::string::npos);
  EXPECT_NE(chief_poll->message().find("connection lost"), std::string::npos);
}

TEST_F(CoordinationServiceTest, EarlyFinisherIsNotMistakenForFailed) {
  auto s = Make({"chief:0", "worker:0"});
  RegisterAll(*s, {1, 1});
  std::optional<Status> worker_exit, chief_exit, chief_poll;
  const uint64_t worker_poll =
      s->PollForErrorAsync("worker:0", 2, [](const Status&) {});
  s->PollForErrorAsync("chief:0", 1, [&](const Status& st) { chief_poll = st; });
  s->ShutdownTaskAsync("worker:0", 2, [&](const Status& st) { worker_exit = st; });
  s->CancelPoll(worker_poll);  // its process goes away after the exit barrier call
  now_ = 2500;                 // and it sends no more heartbeats
  ASSERT_TRUE(s->Heartbeat("chief:0", 1).ok());
  s->CheckDeadlines();
  EXPECT_FALSE(s->job_error().has_value());
  EXPECT_FALSE(worker_exit.has_value());
  s->ShutdownTaskAsync("chief:0", 1, [&](const Status& st) { chief_exit = st; });
  ASSERT_TRUE(worker_exit && chief_exit && chief_poll);
  EXPECT_TRUE(worker_exit->ok() && chief_exit->ok() && chief_poll->ok());
  EXPECT_EQ(s->task_state("worker:0"), TaskState::kShutdown);
}

TEST_F(CoordinationServiceTest, ExitBarrierTimeoutNamesRunningTasks) {
  auto s = Make({"chief:0", "worker:0"});
  RegisterAll(*s, {1, 1});
  std::optional<Status> chief_exit;
  s->ShutdownTaskAsync("chief:0", 1, [&](const Status& st) { chief_exit = st; });
  now_ = 900;
  ASSERT_TRUE(s->Heartbeat("worker:0", 2).ok());
  now_ = 3000;
  s->CheckDeadlines();
  ASSERT_TRUE(chief_exit.has_value());
  // worker:0 went silent during it, so it is failed; either way it is named.
  EXPECT_NE(chief_exit->message().find("worker:0"), std::string::npos) << *chief_exit;
}

TEST_F(CoordinationServiceTest, ReportedErrorReachesPeers) {
  auto s = Make({"chief:0", "worker:0"});
  RegisterAll(*s, {1, 1});
  std::optional<Status> chief_poll;
  s->PollForErrorAsync("chief:0", 1, [&](const Status& st) { chief_poll = st; });
  ASSERT_TRUE(s->ReportError("worker:0", 2, DataLossError("shard 3 is corrupt")).ok());
  ASSERT_TRUE(chief_poll.has_value());
  EXPECT_EQ(chief_poll->code(), StatusCode::kAborted);
  EXPECT_NE(chief_poll->message().find("exited with error: DATA_LOSS: shard 3 is corrupt"),
            std::string::npos)
      << *chief_poll;
}

TEST_F(CoordinationServiceTest, StopFailsPendingCalls) {
  auto s = Make({"chief:0", "worker:0"});
  std::optional<StatusOr<RegisteredView>> chief;
  s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1}, [&](const auto& v) { chief = v; });
  s->Stop();
  ASSERT_TRUE(chief.has_value());
  EXPECT_EQ(chief->status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mirrored::coordination
