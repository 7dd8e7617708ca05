// The coordination service over real gRPC on loopback, with agents as
// threads, once the job runs: failure propagation (a lost agent, a reported
// error, a task declared failed, a task or chief that did not run, a lost
// service), each task blaming the right one.
#include <gtest/gtest.h>

#include <atomic>

#include "tests/coordination/coordination_grpc_test_util.h"

namespace mirrored::coordination {
namespace {

TEST_F(CoordinationGrpcTest, LostAgentAbortsBlockedPeersPromptly) {
  StartService(3);
  auto agents = ConnectAll(3);
  // Connect() returns only once the service holds the agent's error poll:
  // that open call is what makes a lost connection visible at once.
  ASSERT_EQ(service_->open_error_polls(), 3u);
  std::atomic<int> callbacks{0};
  agents[0]->SetErrorCallback([&](const Status&) { ++callbacks; });
  auto blocked = std::async(std::launch::async, [&] { return agents[0]->Barrier("never", 30000); });
  auto waiting = std::async(std::launch::async,
                            [&] { return agents[1]->KeyValueGet("never/set", 30000).status(); });
  const auto start = std::chrono::steady_clock::now();
  agents[2].reset();  // drops its error poll without the exit barrier: "connection lost"
  for (Status s : {blocked.get(), waiting.get()}) {
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
    EXPECT_NE(s.message().find("task worker:1"), std::string::npos) << s;
    EXPECT_NE(s.message().find("connection lost"), std::string::npos) << s;
    EXPECT_EQ(ExitCodeFor(s), kExitPeerFailed);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(WaitFor([&] { return callbacks.load() == 1; }, std::chrono::seconds(2)));
  EXPECT_EQ(agents[0]->state(), CoordinationAgent::State::kError);
  EXPECT_EQ(agents[0]->Shutdown().code(), StatusCode::kAborted);
}

TEST_F(CoordinationGrpcTest, ReportedErrorReachesEveryAgent) {
  StartService(2);
  auto agents = ConnectAll(2);
  std::promise<Status> seen;
  agents[0]->SetErrorCallback([&](const Status& s) { seen.set_value(s); });
  EXPECT_TRUE(agents[1]->ReportError(InternalError("loss is NaN at step 12")).ok());
  auto f = seen.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const Status s = f.get();
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("worker:0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("loss is NaN at step 12"), std::string::npos) << s;
}

// A task the service gave up on (no heartbeat past the timeout: frozen,
// starved) learns it on its error poll: its own failure (Unavailable, exit
// 1), saying so, not "task <itself> failed" as if a peer had.
TEST_F(CoordinationGrpcTest, ATaskDeclaredFailedSaysItWasThisTask) {
  StartService(2);
  CoordinationAgent chief(AgentOptions("chief:0"));
  CoordinationAgentOptions quiet = AgentOptions("worker:0");
  quiet.heartbeat_interval = std::chrono::milliseconds(60000);  // no heartbeat within the service's 1 s
  CoordinationAgent worker(quiet);
  auto chief_connected = std::async(std::launch::async, [&] { return chief.Connect(); });
  ASSERT_TRUE(worker.Connect().ok());
  ASSERT_TRUE(chief_connected.get().ok());
  ASSERT_TRUE(WaitFor([&] { return !worker.error().ok(); }, std::chrono::seconds(10)));
  const Status s = worker.error();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_EQ(ExitCodeFor(s), kExitFailure);
  EXPECT_NE(s.message().find("declared this task (worker:0) failed"), std::string::npos) << s;
  EXPECT_NE(s.message().find("heartbeat timeout"), std::string::npos) << s;
  ASSERT_TRUE(WaitFor([&] { return !chief.error().ok(); }, std::chrono::seconds(10)));
  EXPECT_EQ(chief.error().code(), StatusCode::kAborted) << chief.error();  // a peer's failure: exit 3
  EXPECT_NE(chief.error().message().find("task worker:0 failed"), std::string::npos) << chief.error();
}

// A task whose process did not run past the heartbeat timeout (SIGSTOP) and
// then finds the service gone (its chief exited after declaring this task
// failed, as on another host) says that it was this task, frozen (exit 1),
// not that the chief was lost (exit 3, blaming the chief). Its clock jumps
// as a stopped process's does.
TEST_F(CoordinationGrpcTest, ATaskThatDidNotRunSaysSoWhenItFindsTheServiceGone) {
  // Time passes for worker:0 alone (its clock jumps); the service must not
  // give up on it meanwhile, and its heartbeat thread must not run a round
  // (a round after the jump, answered, would start a fresh count).
  service_heartbeat_timeout_ms_ = 60000;
  StartService(2);
  std::atomic<int64_t> frozen_ms{0};
  std::vector<std::unique_ptr<CoordinationAgent>> agents;
  for (const std::string& name : TaskNames(2)) {
    CoordinationAgentOptions o = AgentOptions(name);
    if (name == "worker:0") {
      o.heartbeat_interval = std::chrono::milliseconds(60000);
      o.clock = [&frozen_ms] { return std::chrono::steady_clock::now() + std::chrono::milliseconds(frozen_ms.load()); };
    }
    agents.push_back(std::make_unique<CoordinationAgent>(o));
  }
  auto chief_connected = std::async(std::launch::async, [&] { return agents[0]->Connect(); });
  ASSERT_TRUE(agents[1]->Connect().ok());
  ASSERT_TRUE(chief_connected.get().ok());
  frozen_ms = 200000;  // it did not run for 200 s
  server_->Stop();    // meanwhile its chief gave up on it and exited
  ASSERT_TRUE(WaitFor([&] { return !agents[1]->error().ok(); }, std::chrono::seconds(10)));
  const Status s = agents[1]->error();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_EQ(ExitCodeFor(s), kExitFailure);
  EXPECT_NE(s.message().find("this task (worker:0) did not run for 2"), std::string::npos) << s;
  // The chief's agent, whose clock did not jump, blames the service.
  ASSERT_TRUE(WaitFor([&] { return !agents[0]->error().ok(); }, std::chrono::seconds(10)));
  EXPECT_EQ(ExitCodeFor(agents[0]->error()), kExitPeerFailed) << agents[0]->error();
}

// A chief that did not run past the heartbeat timeout finds, once it runs
// again, that a peer failed (it gave up on the chief meanwhile): the root
// cause is the chief's own freeze (exit 1), not the peer (exit 3). Its clock
// jumps as a stopped process's does; its heartbeat rounds go on.
TEST_F(CoordinationGrpcTest, APeerFailureJustAfterThisTaskDidNotRunIsBlamedOnTheFreeze) {
  service_heartbeat_timeout_ms_ = 60000;
  StartService(2);
  std::atomic<int64_t> frozen_ms{0};
  CoordinationAgentOptions chief_options = AgentOptions("chief:0");
  chief_options.clock = [&frozen_ms] {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(frozen_ms.load());
  };
  CoordinationAgent chief(chief_options);
  CoordinationAgent worker(AgentOptions("worker:0"));
  auto chief_connected = std::async(std::launch::async, [&] { return chief.Connect(); });
  ASSERT_TRUE(worker.Connect().ok());
  ASSERT_TRUE(chief_connected.get().ok());
  frozen_ms = 200000;
  ASSERT_TRUE(worker.ReportError(InternalError("gave up on the chief")).ok());
  ASSERT_TRUE(WaitFor([&] { return !chief.error().ok(); }, std::chrono::seconds(10)));
  const Status s = chief.error();
  EXPECT_EQ(ExitCodeFor(s), kExitFailure) << s;
  EXPECT_NE(s.message().find("this task (chief:0) did not run for"), std::string::npos) << s;
  EXPECT_NE(s.message().find("task worker:0 failed"), std::string::npos) << s;  // what it found then
}

// A task reporting its own error keeps that error, not the service's echo of
// it ("task <itself> failed: ...").
TEST_F(CoordinationGrpcTest, AReportedErrorIsKeptAsItIs) {
  StartService(2);
  auto agents = ConnectAll(2);
  ASSERT_TRUE(agents[1]->ReportError(InvalidArgumentError("--lr nan: bad flag")).ok());
  const Status s = agents[1]->error();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "--lr nan: bad flag");
}

TEST_F(CoordinationGrpcTest, LostServiceIsNoticed) {
  StartService(2);
  auto agents = ConnectAll(2);
  auto blocked = std::async(std::launch::async, [&] { return agents[1]->Barrier("b", 30000); });
  server_->Stop();  // as if the chief died
  const Status s = blocked.get();
  EXPECT_EQ(ExitCodeFor(s), kExitPeerFailed) << s;
  EXPECT_NE(s.message().find("chief:0"), std::string::npos) << s;
}

}  // namespace
}  // namespace mirrored::coordination
