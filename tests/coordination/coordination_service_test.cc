// CoordinationService logic with no network: a fake clock drives every
// deadline through CheckDeadlines().
#include "worker/coordination/coordination_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

namespace mirrored::coordination {
namespace {

class CoordinationServiceTest : public ::testing::Test {
 protected:
  std::unique_ptr<CoordinationService> Make(std::vector<std::string> tasks) {
    CoordinationServiceOptions o;
    o.tasks = std::move(tasks);
    o.heartbeat_timeout_ms = 1000;
    o.registration_timeout_ms = 5000;
    o.shutdown_timeout_ms = 3000;
    o.now_ms = [this] { return now_.load(); };
    o.make_nccl_unique_id = [this]() -> StatusOr<std::string> {
      return std::string(128, static_cast<char>('a' + ids_made_++));
    };
    auto s = CoordinationService::Create(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  // Registers every task (incarnation = index + 1) and returns their views.
  std::vector<std::optional<StatusOr<RegisteredView>>> RegisterAll(
      CoordinationService& s, const std::vector<int>& devices) {
    std::vector<std::optional<StatusOr<RegisteredView>>> views(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      s.RegisterTaskAsync({.task = s.options().tasks[i], .incarnation = i + 1, .device_count = devices[i]},
                          [&views, i](const StatusOr<RegisteredView>& v) { views[i] = v; });
    }
    return views;
  }

  // chief:0 (10.0.0.1, incarnation 1) and worker:0 (10.0.0.2, incarnation
  // 2) registered, worker:0's error poll open: a running job.
  std::unique_ptr<CoordinationService> RunningJob() {
    auto s = Make({"chief:0", "worker:0"});
    std::vector<std::optional<StatusOr<RegisteredView>>> views(2);
    s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1, .peer = "ipv4:10.0.0.1:40000"},
                         [&](const auto& v) { views[0] = v; });
    s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1, .peer = "ipv4:10.0.0.2:40001"},
                         [&](const auto& v) { views[1] = v; });
    EXPECT_TRUE(views[0] && views[0]->ok() && views[1] && views[1]->ok());
    s->PollForErrorAsync("worker:0", 2, [](const Status&) {});
    return s;
  }

  // A process registering as worker:0 from its host (10.0.0.2), not
  // restarted by a launcher: the service's answer.
  static Status ClaimWorker0(CoordinationService& s, uint64_t incarnation) {
    std::optional<StatusOr<RegisteredView>> answer;
    s.RegisterTaskAsync(
        {.task = "worker:0", .incarnation = incarnation, .device_count = 1, .peer = "ipv4:10.0.0.2:40003"},
        [&](const auto& v) { answer = v; });
    EXPECT_TRUE(answer.has_value());
    return answer ? answer->status() : InternalError("no answer");
  }

  // `ms` pass on the fake clock while both tasks of RunningJob heartbeat.
  void Pass(CoordinationService& s, int64_t ms) {
    now_ += ms;
    EXPECT_TRUE(s.Heartbeat("chief:0", 1).ok());
    EXPECT_TRUE(s.Heartbeat("worker:0", 2).ok());
  }

  static bool ToldToWait(const Status& s) {
    return s.code() == StatusCode::kUnavailable &&
           s.message().find(kPreviousProcessStillRunning) != std::string::npos;
  }

  std::atomic<int64_t> now_{0};
  int ids_made_ = 0;
};

TEST_F(CoordinationServiceTest, RejectsBadTaskLists) {
  EXPECT_EQ(CoordinationService::Create({}).status().code(), StatusCode::kInvalidArgument);
  CoordinationServiceOptions o;
  o.tasks = {"worker:0", "worker:0"};
  EXPECT_EQ(CoordinationService::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CoordinationServiceTest, RegistrationWaitsForAllAndAssignsRanks) {
  auto s = Make({"chief:0", "worker:0", "worker:1"});
  std::vector<std::optional<StatusOr<RegisteredView>>> views(3);
  s->RegisterTaskAsync({.task = "worker:1", .incarnation = 30, .device_count = 1},
                       [&](const auto& v) { views[2] = v; });
  s->RegisterTaskAsync({.task = "chief:0", .incarnation = 10, .device_count = 2}, [&](const auto& v) { views[0] = v; });
  EXPECT_FALSE(views[0] || views[2]);
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 20, .device_count = 2},
                       [&](const auto& v) { views[1] = v; });
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(views[i] && views[i]->ok()) << i;
    EXPECT_EQ((*views[i])->task_index, i);
    EXPECT_EQ((*views[i])->view, (*views[0])->view);
  }
  const ClusterView& v = (*views[0])->view;
  EXPECT_EQ(v.world_size, 5);
  EXPECT_EQ(v.tasks[0].rank_offset, 0);
  EXPECT_EQ(v.tasks[1].rank_offset, 2);
  EXPECT_EQ(v.tasks[2].rank_offset, 4);
  EXPECT_FALSE(v.device_counts_match);  // allowed, and reported
  EXPECT_EQ(v.nccl_unique_id, std::string(128, 'a'));
}

TEST_F(CoordinationServiceTest, RegistrationTimeoutNamesMissingTasks) {
  auto s = Make({"chief:0", "worker:0", "worker:1"});
  std::optional<StatusOr<RegisteredView>> chief;
  s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1}, [&](const auto& v) { chief = v; });
  s->RegisterTaskAsync({.task = "worker:1", .incarnation = 3, .device_count = 1}, [](const auto&) {});
  now_ = 4999;
  s->CheckDeadlines();
  EXPECT_FALSE(chief.has_value());
  now_ = 5000;
  s->CheckDeadlines();
  ASSERT_TRUE(chief.has_value());
  EXPECT_EQ(chief->status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(chief->status().message().find("worker:0"), std::string::npos);
  EXPECT_EQ(chief->status().message().find("worker:1"), std::string::npos);
  EXPECT_NE(chief->status().message().find("5000 ms"), std::string::npos);
}

// A task that fails before it registers (a bad flag on its host) reports
// so: the tasks waiting for the job to form learn it at once (the job's
// error, naming it and its code), and so does any that comes later.
TEST_F(CoordinationServiceTest, AFailureBeforeJoiningEndsTheWaitForTheJob) {
  auto s = Make({"chief:0", "worker:0", "worker:1"});
  std::optional<StatusOr<RegisteredView>> chief, late;
  s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1}, [&](const auto& v) { chief = v; });
  // Only an unregistered task, with incarnation kBeforeJoining, may do so.
  EXPECT_FALSE(s->ReportError("chief:0", CoordinationService::kBeforeJoining, InvalidArgumentError("x")).ok());
  EXPECT_FALSE(chief.has_value());
  ASSERT_TRUE(s->ReportError("worker:1", CoordinationService::kBeforeJoining,
                             InvalidArgumentError("--model \"mpl\" is not one of mlp, cnn, resnet"))
                  .ok());
  ASSERT_TRUE(chief.has_value());
  EXPECT_EQ(chief->status().code(), StatusCode::kAborted) << chief->status();
  EXPECT_NE(chief->status().message().find("task worker:1 failed at "), std::string::npos) << chief->status();
  EXPECT_NE(chief->status().message().find(": exited with error: INVALID_ARGUMENT: --model \"mpl\" is not one of "
                                           "mlp, cnn, resnet (before it joined the job)"),
            std::string::npos)
      << chief->status();
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1}, [&](const auto& v) { late = v; });
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->status().code(), StatusCode::kAborted) << late->status();
}

// A chief that failed before the job formed serves that error alone: it
// waits until every other task knows it, by reporting its own failure or by
// registering and being answered with the error, and no longer.
TEST_F(CoordinationServiceTest, TheChiefsFailureBeforeJoiningIsServedUntilEveryTaskKnowsIt) {
  auto s = Make({"chief:0", "worker:0", "worker:1"});
  EXPECT_TRUE(s->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(0)).empty())
      << "no job error: nothing to tell";
  ASSERT_TRUE(s->ReportError("chief:0", CoordinationService::kBeforeJoining, NotFoundError("/x: no such file")).ok());
  EXPECT_EQ(s->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(1)),
            (std::vector<std::string>{"worker:0", "worker:1"}));
  std::optional<StatusOr<RegisteredView>> w0;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1}, [&](const auto& v) { w0 = v; });
  ASSERT_TRUE(w0.has_value());
  EXPECT_EQ(w0->status().code(), StatusCode::kAborted) << w0->status();
  EXPECT_NE(w0->status().message().find("task chief:0 failed at "), std::string::npos) << w0->status();
  EXPECT_NE(w0->status().message().find("NOT_FOUND: /x: no such file (before it joined the job)"), std::string::npos)
      << w0->status();
  EXPECT_EQ(s->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(1)), (std::vector<std::string>{"worker:1"}));
  // The last one reports a failure of its own from another thread: the wait
  // ends then, long before its timeout.
  std::thread reporter([&] {
    EXPECT_TRUE(s->ReportError("worker:1", CoordinationService::kBeforeJoining, InvalidArgumentError("bad")).ok());
  });
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(s->WaitUntilEveryTaskKnowsFailure(std::chrono::seconds(60)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  reporter.join();
}

// A long wait for the job to form is not silent: every 30 s the chief says
// whom it still waits for.
TEST_F(CoordinationServiceTest, ALongRegistrationWaitNamesTheMissingTasksEvery30s) {
  CoordinationServiceOptions o;
  o.tasks = {"chief:0", "worker:0", "worker:1"};
  o.registration_timeout_ms = 300000;
  o.now_ms = [this] { return now_.load(); };
  auto s = CoordinationService::Create(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status();
  (*s)->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1}, [](const auto&) {});
  auto said_at = [&](int64_t now) {
    now_ = now;
    ::testing::internal::CaptureStderr();
    (*s)->CheckDeadlines();
    return ::testing::internal::GetCapturedStderr();
  };
  EXPECT_EQ(said_at(29999), "");
  EXPECT_NE(said_at(30000).find("still waiting for tasks to register: worker:0, worker:1 (1 of 3 registered; 270 s "
                                "left of the registration timeout)"),
            std::string::npos);
  EXPECT_EQ(said_at(45000), "");
  EXPECT_NE(said_at(60000).find("still waiting for tasks to register"), std::string::npos);
}

// Tasks started from different clusters: every registration fails at once
// with InvalidArgument showing both (not a registration timeout, minutes
// later, about a task the chief never expected).
TEST_F(CoordinationServiceTest, ATaskWithAnotherClusterFailsEveryRegistration) {
  CoordinationServiceOptions o;
  o.tasks = {"worker:0", "worker:1"};
  o.cluster = "worker:0, worker:1";
  o.make_nccl_unique_id = []() -> StatusOr<std::string> { return std::string(128, 'x'); };
  auto s = CoordinationService::Create(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status();
  std::optional<StatusOr<RegisteredView>> chief, other, late;
  (*s)->RegisterTaskAsync({.task = "worker:0", .incarnation = 1, .device_count = 1, .cluster = "worker:0, worker:1"},
                          [&](const auto& v) { chief = v; });
  EXPECT_FALSE(chief.has_value());
  (*s)->RegisterTaskAsync(
      {.task = "worker:1", .incarnation = 2, .device_count = 1, .cluster = "worker:0, worker:1, worker:2"},
      [&](const auto& v) { other = v; });
  ASSERT_TRUE(chief.has_value() && other.has_value());
  for (const auto* v : {&*chief, &*other}) {
    EXPECT_EQ(v->status().code(), StatusCode::kInvalidArgument) << v->status();
    EXPECT_NE(v->status().message().find("task worker:1 was started with another cluster than the chief's: its "
                                         "TF_CONFIG lists the training tasks [worker:0, worker:1, worker:2], the "
                                         "chief's [worker:0, worker:1]"),
              std::string::npos)
        << v->status();
  }
  // A task that comes later (the same cluster as the chief's) learns it too.
  (*s)->RegisterTaskAsync({.task = "worker:1", .incarnation = 3, .device_count = 1, .cluster = "worker:0, worker:1"},
                          [&](const auto& v) { late = v; });
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->status().code(), StatusCode::kInvalidArgument) << late->status();
}

// The registration error of a task with another cluster is the job's
// failure too: the tasks yet to register have not heard it (a chief whose
// join failed so keeps its service up for them) until they register.
// After a registration timeout there is no one to tell: the tasks missing
// are those that did not come.
TEST_F(CoordinationServiceTest, TheTasksYetToRegisterHaveNotHeardARegistrationErrorButNotATimeout) {
  CoordinationServiceOptions o;
  o.tasks = {"worker:0", "worker:1", "worker:2"};
  o.cluster = "worker:0, worker:1, worker:2";
  auto s = CoordinationService::Create(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(0)).empty()) << "no error yet";
  (*s)->RegisterTaskAsync(
      {.task = "worker:0", .incarnation = 1, .device_count = 1, .cluster = "worker:0, worker:1, worker:2"},
      [](const auto&) {});
  (*s)->RegisterTaskAsync({.task = "worker:1", .incarnation = 2, .device_count = 1, .cluster = "worker:0, worker:1"},
                          [](const auto&) {});
  EXPECT_EQ((*s)->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(1)),
            (std::vector<std::string>{"worker:2"}));
  std::thread late([&] {
    (*s)->RegisterTaskAsync(
        {.task = "worker:2", .incarnation = 3, .device_count = 1, .cluster = "worker:0, worker:1, worker:2"},
        [](const StatusOr<RegisteredView>& v) { EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument); });
  });
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE((*s)->WaitUntilEveryTaskKnowsFailure(std::chrono::seconds(60)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  late.join();

  auto timed_out = Make({"chief:0", "worker:0"});
  timed_out->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1}, [](const auto&) {});
  now_ = 5000;
  timed_out->CheckDeadlines();
  EXPECT_TRUE(timed_out->WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(0)).empty());
}

// A second process claiming a task that runs, from another host, while that
// task heartbeats: refused alone (exit 2), the job goes on. The same claim
// once the task has gone silent, or from the task's own host, is a restart.
TEST_F(CoordinationServiceTest, ASecondProcessClaimingARunningTaskFromAnotherHostIsRefusedAlone) {
  auto s = Make({"chief:0", "worker:0"});
  std::vector<std::optional<StatusOr<RegisteredView>>> views(2);
  s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1, .peer = "ipv4:10.0.0.1:40000"},
                       [&](const auto& v) { views[0] = v; });
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1, .peer = "ipv4:10.0.0.2:40001"},
                       [&](const auto& v) { views[1] = v; });
  ASSERT_TRUE(views[0] && views[0]->ok() && views[1] && views[1]->ok());
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
  auto s = Make({"chief:0", "worker:0"});
  std::vector<std::optional<StatusOr<RegisteredView>>> views(2);
  s->RegisterTaskAsync({.task = "chief:0", .incarnation = 1, .device_count = 1, .peer = "ipv4:10.0.0.1:40000"},
                       [&](const auto& v) { views[0] = v; });
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1, .peer = "ipv4:10.0.0.2:40001"},
                       [&](const auto& v) { views[1] = v; });
  ASSERT_TRUE(views[1] && views[1]->ok());
  now_ += 2500;  // a pod on a dead node, rescheduled elsewhere
  std::optional<StatusOr<RegisteredView>> moved;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 3, .device_count = 1, .peer = "ipv4:10.0.0.9:40002"},
                       [&](const auto& v) { moved = v; });
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->status().code(), StatusCode::kAborted) << moved->status();
}

TEST_F(CoordinationServiceTest, UnknownTaskIsInvalidArgument) {
  auto s = Make({"chief:0"});
  std::optional<StatusOr<RegisteredView>> v;
  s->RegisterTaskAsync({.task = "worker:9", .incarnation = 1, .device_count = 1}, [&](const auto& r) { v = r; });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->status().code(), StatusCode::kInvalidArgument);
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

TEST_F(CoordinationServiceTest, SameIncarnationRegisterIsIdempotent) {
  auto s = Make({"chief:0", "worker:0"});
  auto views = RegisterAll(*s, {1, 1});
  std::optional<StatusOr<RegisteredView>> again;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1}, [&](const auto& v) { again = v; });
  ASSERT_TRUE(again && again->ok());
  EXPECT_EQ((*again)->view, (*views[1])->view);
  EXPECT_FALSE(s->job_error().has_value());
}

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
