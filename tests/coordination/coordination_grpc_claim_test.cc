// The coordination service over real gRPC on loopback, with agents as
// threads, for a process registering as a task another process holds: a
// launcher's restart is recognised and fails the job, waits out a failed
// generation and joins the next (or gives up at its deadline, or when asked
// to stop); a second process on the task's host waits for the old one, then
// is refused alone, or told the job has ended.
#include <gtest/gtest.h>

#include <atomic>

#include "tests/coordination/coordination_grpc_test_util.h"

namespace mirrored::coordination {
namespace {

TEST_F(CoordinationGrpcTest, RestartedTaskIsRecognisedAndFailsTheJob) {
  StartService(2);
  auto agents = ConnectAll(2);
  std::promise<Status> seen;
  agents[0]->SetErrorCallback([&](const Status& s) { seen.set_value(s); });
  // A new process (new incarnation) that its launcher started again. It
  // waits for the chief's next generation, until told to stop.
  std::atomic<bool> stop{false};
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.restarted = true;
  o.stop_waiting = [&] { return stop.load(); };
  CoordinationAgent restarted(o);
  ASSERT_NE(restarted.incarnation(), agents[1]->incarnation());
  auto connected = std::async(std::launch::async, [&] { return restarted.Connect(); });
  auto f = seen.get_future();
  const bool chief_told = f.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  stop = true;
  const Status s = connected.get();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
  ASSERT_TRUE(chief_told);
  const Status chief = f.get();
  EXPECT_NE(chief.message().find("task worker:0 failed"), std::string::npos) << chief;
  EXPECT_NE(chief.message().find("restarted with a new incarnation"), std::string::npos) << chief;
}

// A second process given a running task on the same host, not a launcher's
// restart (a launcher started twice, a duplicated step): while the task's
// process is connected and heartbeating it waits a heartbeat timeout (the
// old one may be stopping), then is refused alone (exit 2), and the job goes
// on. Before, it was taken for a restart: the job failed, and with
// --max-restarts the two knocked each other out until none was left.
TEST_F(CoordinationGrpcTest, ASecondProcessOfARunningTaskOnTheSameHostIsRefusedAlone) {
  StartService(2);
  auto agents = ConnectAll(2);
  CoordinationAgent second(AgentOptions("worker:0"));
  const auto start = std::chrono::steady_clock::now();
  const Status s = second.Connect();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("task worker:0 is still running: its process on "), std::string::npos) << s;
  EXPECT_NE(s.message().find("this second process claiming it"), std::string::npos) << s;
  EXPECT_GE(waited, std::chrono::milliseconds(service_heartbeat_timeout_ms_));
  EXPECT_FALSE(service_->job_error().has_value()) << service_->job_error()->message();
  EXPECT_EQ(service_->task_state("worker:0"), TaskState::kConnected);
}

// The same, but the task's process ends while the newcomer waits (a Ctrl-C
// and an immediate re-run): the newcomer is not refused as a second process;
// it learns what any task would, that worker:0's process is gone. (The
// service's wait is long here, so that a loaded machine cannot end it first.)
TEST_F(CoordinationGrpcTest, ASecondProcessOnTheSameHostWaitsForTheOldOneToEnd) {
  service_heartbeat_timeout_ms_ = 5000;
  StartService(2);
  auto agents = ConnectAll(2);
  CoordinationAgent second(AgentOptions("worker:0"));
  auto connected = std::async(std::launch::async, [&] { return second.Connect(); });
  // The service told it to wait: only then does worker:0's process end.
  ASSERT_TRUE(WaitFor([&] { return service_->waiting_claims("worker:0") == 1; }, std::chrono::seconds(5)));
  agents[1].reset();  // worker:0's process ends without its exit barrier
  const Status s = connected.get();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("task worker:0 failed"), std::string::npos) << s;
}

// Two second processes of a running task on its host at once (a step
// started three times): each is refused after its own wait. With one
// waiting slot per task they restarted each other's wait and, at their
// registration deadline, returned the service's "wait" answer (Unavailable,
// exit 1) instead of a refusal.
TEST_F(CoordinationGrpcTest, TwoSecondProcessesOfARunningTaskOnTheSameHostAreBothRefused) {
  StartService(2);
  auto agents = ConnectAll(2);
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.registration_timeout = std::chrono::milliseconds(4000);
  CoordinationAgent second(o), third(o);
  auto second_connected = std::async(std::launch::async, [&] { return second.Connect(); });
  auto third_connected = std::async(std::launch::async, [&] { return third.Connect(); });
  for (Status s : {second_connected.get(), third_connected.get()}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    // The service's own refusal after each one's wait, not the agent's at
    // its registration deadline (which a shared slot came to).
    EXPECT_NE(s.message().find("kept heartbeating and stayed connected for the"), std::string::npos) << s;
  }
  EXPECT_FALSE(service_->job_error().has_value()) << service_->job_error()->message();
}

// A registration timeout shorter than the service's wait (--registration-
// timeout under --heartbeat-timeout): at its deadline the newcomer is
// refused saying so, not with the service's "waits up to 5000 ms" answer.
TEST_F(CoordinationGrpcTest, ASecondProcessWhoseRegistrationTimeoutEndsItsWaitIsRefused) {
  service_heartbeat_timeout_ms_ = 5000;
  StartService(2);
  auto agents = ConnectAll(2);
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.registration_timeout = std::chrono::milliseconds(500);
  CoordinationAgent second(o);
  const Status s = second.Connect();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("task worker:0 is still running: its process on this host did not end within this "
                             "second process's registration timeout (500 ms)"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.message().find("waits up to"), std::string::npos) << s;
  EXPECT_FALSE(service_->job_error().has_value()) << service_->job_error()->message();
}

// The job ends cleanly while a second process waits for the task's process
// (a SIGTERM stopping the job through its exit barrier, then an immediate
// re-run): the newcomer exits 2 at once, saying the job has ended; the job's
// own tasks pass their exit barrier. It failed the exit barrier (exit 3), or,
// the chief gone, registered until its registration timeout (exit 4).
TEST_F(CoordinationGrpcTest, ASecondProcessWaitingWhenTheJobEndsCleanlyIsToldItHasEnded) {
  service_heartbeat_timeout_ms_ = 60000;  // the wait does not end by itself
  StartService(2);
  auto agents = ConnectAll(2);
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.registration_timeout = std::chrono::milliseconds(60000);
  CoordinationAgent second(o);
  auto connected = std::async(std::launch::async, [&] { return second.Connect(); });
  ASSERT_TRUE(WaitFor([&] { return service_->waiting_claims("worker:0") == 1; }, std::chrono::seconds(5)));
  for (const Status& s : OnAll(agents, [](CoordinationAgent& a) { return a.Shutdown(); })) {
    EXPECT_TRUE(s.ok()) << s;
  }
  ASSERT_EQ(connected.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Status s = connected.get();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the job that ran it has ended: its process on "), std::string::npos) << s;
}

// The same with the chief's service gone while the newcomer waits: it
// stops within a heartbeat timeout of the service's silence (1 s here), at
// most one registration after, not at its registration timeout (exit 4).
TEST_F(CoordinationGrpcTest, ASecondProcessWaitingWhenTheServiceGoesAwayIsToldTheJobHasEnded) {
  service_heartbeat_timeout_ms_ = 60000;
  StartService(2);
  auto agents = ConnectAll(2);
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.registration_timeout = std::chrono::milliseconds(60000);
  CoordinationAgent second(o);
  auto connected = std::async(std::launch::async, [&] { return second.Connect(); });
  ASSERT_TRUE(WaitFor([&] { return service_->waiting_claims("worker:0") == 1; }, std::chrono::seconds(5)));
  server_->Stop(0);
  server_.reset();
  ASSERT_EQ(connected.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Status s = connected.get();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the job that ran it has ended"), std::string::npos) << s;
}

// A launcher restarts its task while the chief of the generation that failed
// still serves: the restarted task is told the job failed, keeps
// registering, and joins the chief's next service on the same address.
TEST_F(CoordinationGrpcTest, RestartedTaskWaitsOutTheFailedGenerationAndJoinsTheNext) {
  StartService(2);
  const std::string address = server_->bound_address();
  auto agents = ConnectAll(2);
  ASSERT_TRUE(agents[1]->ReportError(InternalError("killed (test)")).ok());
  ASSERT_TRUE(WaitFor([&] { return service_->job_error().has_value(); }, std::chrono::seconds(5)));

  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.restarted = true;
  CoordinationAgent restarted(o);
  auto connected = std::async(std::launch::async, [&] { return restarted.Connect(); });
  // The old generation ends, then its chief comes back on the same port.
  agents.clear();
  server_->Stop();
  server_.reset();
  StartService(2, 10000, address);
  CoordinationAgent chief(AgentOptions("chief:0"));
  ASSERT_TRUE(chief.Connect().ok());
  const Status s = connected.get();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(restarted.cluster_view().generation, chief.cluster_view().generation);
  EXPECT_EQ(restarted.task_index(), 1);
}

TEST_F(CoordinationGrpcTest, RestartedTaskGivesUpOnAFailedGenerationAtItsDeadline) {
  StartService(2);
  auto agents = ConnectAll(2);
  ASSERT_TRUE(agents[1]->ReportError(InternalError("killed (test)")).ok());
  ASSERT_TRUE(WaitFor([&] { return service_->job_error().has_value(); }, std::chrono::seconds(5)));
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.restarted = true;
  o.registration_timeout = std::chrono::milliseconds(300);
  CoordinationAgent restarted(o);
  const Status s = restarted.Connect();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("only answered for the generation that failed"), std::string::npos) << s;
  EXPECT_NE(s.message().find("killed (test)"), std::string::npos) << s;
}

TEST_F(CoordinationGrpcTest, RestartedTaskStopsWaitingWhenAskedTo) {
  StartService(2);
  auto agents = ConnectAll(2);
  ASSERT_TRUE(agents[1]->ReportError(InternalError("killed (test)")).ok());
  ASSERT_TRUE(WaitFor([&] { return service_->job_error().has_value(); }, std::chrono::seconds(5)));
  std::atomic<bool> stop{false};
  CoordinationAgentOptions o = AgentOptions("worker:0");
  o.restarted = true;
  o.registration_timeout = std::chrono::milliseconds(60000);
  o.stop_waiting = [&] { return stop.load(); };
  CoordinationAgent restarted(o);
  auto connected = std::async(std::launch::async, [&] { return restarted.Connect(); });
  stop = true;  // as SIGTERM from the launcher would
  ASSERT_EQ(connected.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "still waiting for the next generation after being asked to stop";
  const Status s = connected.get();
  if (s.code() == StatusCode::kCancelled) {
    // Stopped before the old service's first answer came (a loaded machine).
    EXPECT_NE(s.message().find("stopped by a signal while waiting"), std::string::npos) << s;
  } else {
    // The usual case: the old generation's cause is kept.
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
    EXPECT_NE(s.message().find("killed (test)"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace mirrored::coordination
