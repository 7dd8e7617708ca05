// CoordinationService logic with no network, while the job forms: the
// tasks registering, the ranks handed out, the registration timeout and its
// notes, failures before joining and tasks from another cluster told to every
// task. A fake clock drives every deadline through CheckDeadlines().
#include "worker/coordination/coordination_service.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "tests/coordination/coordination_service_test_util.h"

namespace mirrored::coordination {
namespace {

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
    EXPECT_EQ(*(*views[i])->view, *(*views[0])->view);
    EXPECT_EQ((*views[i])->view, (*views[0])->view);  // one shared view, not a copy per task
  }
  const ClusterView& v = *(*views[0])->view;
  EXPECT_EQ(v.world_size, 5);
  EXPECT_EQ(v.tasks[0].rank_offset, 0);
  EXPECT_EQ(v.tasks[1].rank_offset, 2);
  EXPECT_EQ(v.tasks[2].rank_offset, 4);
  EXPECT_FALSE(v.device_counts_match);  // allowed, and reported
  // CPU replicas: no NCCL id is made (no bootstrap listener in the chief,
  // probe D11); the 128 bytes in its place are random.
  EXPECT_EQ(v.nccl_unique_id.size(), 128u);
  EXPECT_EQ(ids_made_, 0);
}

TEST_F(CoordinationServiceTest, OnlyAJobWithGpuReplicasGetsAnNcclId) {
  auto s = Make({"worker:0", "worker:1"});
  std::vector<std::optional<StatusOr<RegisteredView>>> views(2);
  for (int i = 0; i < 2; ++i) {
    s->RegisterTaskAsync({.task = "worker:" + std::to_string(i), .incarnation = uint64_t(i) + 1, .device_count = 8,
                          .gpu = true},
                         [&views, i](const auto& v) { views[i] = v; });
  }
  ASSERT_TRUE(views[0] && views[0]->ok() && views[1] && views[1]->ok());
  EXPECT_EQ((*views[0])->view->nccl_unique_id, std::string(128, 'a'));
  EXPECT_EQ((*views[1])->view->nccl_unique_id, std::string(128, 'a'));
  EXPECT_EQ(ids_made_, 1);
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
  o.registration_timeout = std::chrono::milliseconds(300000);
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

TEST_F(CoordinationServiceTest, UnknownTaskIsInvalidArgument) {
  auto s = Make({"chief:0"});
  std::optional<StatusOr<RegisteredView>> v;
  s->RegisterTaskAsync({.task = "worker:9", .incarnation = 1, .device_count = 1}, [&](const auto& r) { v = r; });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CoordinationServiceTest, SameIncarnationRegisterIsIdempotent) {
  auto s = Make({"chief:0", "worker:0"});
  auto views = RegisterAll(*s, {1, 1});
  std::optional<StatusOr<RegisteredView>> again;
  s->RegisterTaskAsync({.task = "worker:0", .incarnation = 2, .device_count = 1}, [&](const auto& v) { again = v; });
  ASSERT_TRUE(again && again->ok());
  EXPECT_EQ(*(*again)->view, *(*views[1])->view);
  EXPECT_FALSE(s->job_error().has_value());
}

}  // namespace
}  // namespace mirrored::coordination
