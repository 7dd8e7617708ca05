// MirroredStrategy as a user's own program meets it: its process-wide
// settings, a retried Create, and misuse of the replica functions that must fail at once with
// a message, not hang until the collective timeout or kill the process.
#include "worker/strategy/mirrored_strategy.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <stdexcept>
#include <latch>
#include <thread>

#include "common/cluster/tf_config_parser.h"
#include "launcher/job/port_reservation.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

StrategyOptions CpuReplicas(int n) {
  StrategyOptions o;
  o.device = DeviceKind::kCpu;
  o.cpu_replicas = n;
  o.collective_timeout = 10s;  // under the binary's ctest timeout: a hang fails cleanly
  return o;
}

void OnSigpipe(int) {}

sighandler_t Disposition() {
  struct sigaction now {};
  sigaction(SIGPIPE, nullptr, &now);
  return now.sa_handler;
}

// Create's account of how far it got belongs to the call, not the process:
// after a Create that reached the service (its registration timed out), a
// retry refused before it (no usable device) still tells the chief's
// service, which then fails the job naming it.
TEST(MirroredStrategyTest, ARetriedCreateReportsItsOwnFailureBeforeJoining) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok());
  auto config = ParseTfConfig(R"({"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                              R"("]},"task":{"type":"worker","index":1}})");
  ASSERT_TRUE(config.ok()) << config.status();
  StrategyOptions so;
  so.job_token = "retry";
  so.registration_timeout = 200ms;  // nobody hosts the chief's service yet
  JoinAttempt attempt;
  auto first = MirroredStrategy::Create(*config, so, &attempt);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kDeadlineExceeded) << first.status();
  EXPECT_TRUE(attempt.reached_service());

  coordination::CoordinationServiceOptions chief_options;
  chief_options.tasks = {"worker:0", "worker:1"};
  auto service = coordination::CoordinationService::Create(chief_options);
  ASSERT_TRUE(service.ok()) << service.status();
  auto server = coordination::CoordinationServer::Start(p0->address(), "retry", service->get());
  ASSERT_TRUE(server.ok()) << server.status();
  so.device = DeviceKind::kGpu;
  so.gpu_probe = [] { return GpuProbe{0, "no CUDA-capable device is detected"}; };
  auto second = MirroredStrategy::Create(*config, so, &attempt);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument) << second.status();
  EXPECT_FALSE(attempt.reached_service()) << "refused before it asked to register";
  attempt.ReportFailure(*config, so, second.status(), 10s);
  const std::optional<Status> job_error = (*service)->job_error();
  ASSERT_TRUE(job_error.has_value()) << "the retry's failure was not reported";
  EXPECT_NE(job_error->message().find("task worker:1 failed at "), std::string::npos) << *job_error;
  EXPECT_NE(job_error->message().find("--device gpu: no usable GPU"), std::string::npos) << *job_error;
}

// A write to a dead peer's socket must fail with EPIPE (the peer's failure,
// exit 3), not kill the task with SIGPIPE (exit 141, no message); a
// program's own SIGPIPE handling is left alone.
TEST(MirroredStrategyTest, CreateIgnoresSigpipeUnlessTheProgramHandlesIt) {
  signal(SIGPIPE, SIG_DFL);
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(1));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_EQ(Disposition(), SIG_IGN);

  signal(SIGPIPE, OnSigpipe);
  strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(1));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_EQ(Disposition(), &OnSigpipe);
  signal(SIGPIPE, SIG_DFL);
}

// Gloo's transport thread throws when a peer's message does not fit the
// operation posted here (another size at the same point): the process ends
// (nothing can catch it), but says what that means first.
TEST(MirroredStrategyDeathTest, AnExceptionInALibraryThreadIsExplained) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(1));
        std::thread([] {
          throw std::runtime_error("[enforce fail at ./gloo/transport/tcp/pair.cc:510] op.preamble.length <= "
                                   "op.nbytes. 20 vs 16");
        }).join();
      },
      "worker:0: fatal: uncaught exception: .*enforce fail.* \\(Gloo received a message that does not fit the "
      "operation posted here");
}

// Replica 1 returns while replica 0 makes one more collective: Internal at
// once naming replica 1, not at the timeout (10 s). (The replicas' group is
// broken for good after it, as after any collective's error.)
TEST(MirroredStrategyTest, AnExtraCollectiveOnOneReplicaFailsAtOnce) {
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(2));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  Status s = (*strategy)->RunReplicas([](ReplicaContext& replica) -> Status {
    std::vector<float> v = {1.0f};
    MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(v));
    if (replica.local_replica() == 0) return replica.communicator().Barrier();
    return OkStatus();
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("local replica 1 returned from the replica function while replica 0 waits for it"),
            std::string::npos)
      << s;
}

TEST(MirroredStrategyTest, ReplicaFunctionsRunAgainAfterReturningTogether) {
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(3));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  for (int round = 0; round < 3; ++round) {
    std::vector<float> sums(3);
    Status s = (*strategy)->RunReplicas([&](ReplicaContext& replica) -> Status {
      std::vector<float> v = {static_cast<float>(round + replica.local_replica())};
      MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(v));
      sums[static_cast<size_t>(replica.local_replica())] = v[0];
      return OkStatus();
    });
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s;
    for (float sum : sums) EXPECT_EQ(sum, static_cast<float>(3 * round + 3)) << "round " << round;
  }
}

// Two tasks (threads of this process); worker:1 stays in its own code
// instead of making its third all-reduce. worker:0's timeout names it, from
// the collective counts their heartbeats report: worker:1 is alive, at 2.
// With 2 replicas a task, the error is still the cross-process operation's,
// not its second replica's "waited for local replica 0".
class CollectiveTimeoutTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectiveTimeoutTest, NamesTheTaskThatNeverStartedIt) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok());
  std::promise<void> timed_out;
  std::shared_future<void> released = timed_out.get_future().share();
  std::vector<Status> results(2);
  std::vector<std::thread> tasks;
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] {
      // worker:1 is released however worker:0 ends, even by a failed ASSERT.
      std::shared_ptr<void> release_on_exit(nullptr, [&](void*) {
        if (index == 0) timed_out.set_value();
      });
      auto config = ParseTfConfig(R"({"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                                  R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}");
      ASSERT_TRUE(config.ok()) << config.status();
      StrategyOptions so = CpuReplicas(GetParam());
      so.job_token = "behind";
      so.registration_timeout = 20s;
      so.collective_timeout = 2s;
      // Heartbeats late by seconds on a loaded machine must not fail worker:1.
      so.heartbeat_interval = 250ms;
      so.heartbeat_timeout = 3s;
      auto strategy = MirroredStrategy::Create(*config, so);
      ASSERT_TRUE(strategy.ok()) << strategy.status();
      results[index] = (*strategy)->RunReplicas([&](ReplicaContext& replica) -> Status {
        for (int step = 0; step < 3; ++step) {
          if (index == 1 && step == 2) released.wait();  // "busy in its own code" until worker:0 has failed
          std::vector<float> v = {1.0f};
          MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(v));
        }
        return OkStatus();
      });
      if (index == 0) (*strategy)->ReportError(results[0]);
    });
  }
  for (auto& t : tasks) t.join();
  EXPECT_EQ(results[0].code(), StatusCode::kDeadlineExceeded) << results[0];
  EXPECT_NE(results[0].message().find("all-reduce #3 "), std::string::npos) << results[0];
  EXPECT_NE(results[0].message().find("(never started by worker:1 (at 2 collectives, unchanged for"),
            std::string::npos)
      << results[0];
  EXPECT_NE(results[0].message().find("alive, so busy or stuck in its own code"), std::string::npos) << results[0];
  // The cross-process operation's own timeout, not a local replica's wait.
  EXPECT_EQ(results[0].message().find("ms for local replicas"), std::string::npos) << results[0];
  EXPECT_FALSE(results[1].ok());
}

INSTANTIATE_TEST_SUITE_P(ReplicasPerTask, CollectiveTimeoutTest, ::testing::Values(1, 2));

// MIRRORED_CHECK_COLLECTIVES: two tasks whose programs all-reduce buffers
// of different sizes (which would end in Gloo's enforce and std::terminate,
// or a hang for other mismatches) both fail at that collective naming what
// each ran, and the variable is what turns the check on.
TEST(MirroredStrategyTest, CheckCollectivesNamesWhatEachTaskRan) {
  ::setenv("MIRRORED_CHECK_COLLECTIVES", "1", 1);
  StrategyOptions from_environment = StrategyOptions::FromEnvironment();
  ::setenv("MIRRORED_CHECK_COLLECTIVES", "0", 1);
  EXPECT_FALSE(StrategyOptions::FromEnvironment().check_collectives);
  ::unsetenv("MIRRORED_CHECK_COLLECTIVES");
  ASSERT_TRUE(from_environment.check_collectives);
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok());
  std::vector<Status> results(2);
  std::vector<std::thread> tasks;
  // Both tasks keep their strategy (and its connection to the service) until
  // both have their result: a task gone first would be reported to the
  // other as lost, which then returns Aborted instead of its own finding.
  std::latch both_done(2);
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] {
      std::unique_ptr<MirroredStrategy> held;  // destroyed after the wait below, on every path
      struct ArriveAtExit {
        std::latch& latch;
        ~ArriveAtExit() { latch.arrive_and_wait(); }
      } arrive{both_done};
      auto config = ParseTfConfig(R"({"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                                  R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}");
      ASSERT_TRUE(config.ok()) << config.status();
      StrategyOptions so = CpuReplicas(2);
      so.check_collectives = true;
      so.job_token = "checked";
      so.registration_timeout = 20s;
      so.collective_timeout = 60s;
      so.heartbeat_timeout = 10s;
      auto strategy = MirroredStrategy::Create(*config, so);
      ASSERT_TRUE(strategy.ok()) << strategy.status();
      held = std::move(*strategy);
      results[index] = held->RunReplicas([&](ReplicaContext& replica) -> Status {
        std::vector<float> same = {1.0f};
        MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(same));
        std::vector<float> v(index == 0 ? 2 : 3, 1.0f);
        return replica.SumAcrossReplicas(v);
      });
    });
  }
  for (auto& t : tasks) t.join();
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("differs across tasks: worker:0 ran all-reduce (sum) of 2 floats; worker:1 ran "
                               "all-reduce (sum) of 3 floats"),
              std::string::npos)
        << s;
  }
}

}  // namespace
}  // namespace mirrored
