// The coordination service over real gRPC on loopback, with agents as
// threads: rendezvous, NCCL id, key-value store, barriers, token checks,
// port clashes, failure propagation and the exit barrier.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <thread>

#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_client.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/coordination/nccl_unique_id.h"

namespace mirrored::coordination {
namespace {

constexpr char kToken[] = "test-token-0123456789";

std::vector<std::string> TaskNames(int n) {
  std::vector<std::string> names = {"chief:0"};
  for (int i = 1; i < n; ++i) names.push_back("worker:" + std::to_string(i - 1));
  return names;
}

// Polls `done` until it holds or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class CoordinationGrpcTest : public ::testing::Test {
 protected:
  void StartService(int n, int64_t registration_timeout_ms = 10000,
                    const std::string& listen_address = "127.0.0.1:0") {
    CoordinationServiceOptions o;
    o.tasks = TaskNames(n);
    o.heartbeat_timeout_ms = service_heartbeat_timeout_ms_;
    o.registration_timeout_ms = registration_timeout_ms;
    o.shutdown_timeout_ms = 5000;
    o.check_interval_ms = 50;
    auto s = CoordinationService::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    service_ = std::move(*s);
    service_->StartDeadlineThread();
    auto server = CoordinationServer::Start(listen_address, kToken, service_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }

  CoordinationAgentOptions AgentOptions(const std::string& task, int devices = 1) {
    CoordinationAgentOptions o;
    o.service_address = server_->bound_address();
    o.task_name = task;
    o.device_count = devices;
    o.job_token = kToken;
    o.service_task = "chief:0";
    o.heartbeat_interval_ms = 100;
    o.heartbeat_timeout_ms = 1000;
    o.registration_timeout_ms = 10000;
    o.shutdown_timeout_ms = 5000;
    return o;
  }

  // The service's heartbeat timeout for the next StartService.
  int64_t service_heartbeat_timeout_ms_ = 1000;

  // Creates and connects one agent per task, concurrently.
  std::vector<std::unique_ptr<CoordinationAgent>> ConnectAll(int n,
                                                             std::vector<int> devices = {}) {
    std::vector<std::unique_ptr<CoordinationAgent>> agents;
    const auto names = TaskNames(n);
    for (int i = 0; i < n; ++i) {
      agents.push_back(std::make_unique<CoordinationAgent>(
          AgentOptions(names[i], devices.empty() ? 1 : devices[i])));
    }
    std::vector<std::future<Status>> results;
    for (auto& a : agents) {
      results.push_back(std::async(std::launch::async, [&a] { return a->Connect(); }));
    }
    for (auto& r : results) EXPECT_TRUE(r.get().ok());
    return agents;
  }

  // Runs fn(agent) on every agent concurrently and returns the statuses.
  std::vector<Status> OnAll(std::vector<std::unique_ptr<CoordinationAgent>>& agents,
                            const std::function<Status(CoordinationAgent&)>& fn) {
    std::vector<std::future<Status>> results;
    for (auto& a : agents) {
      results.push_back(std::async(std::launch::async, [&a, &fn] { return fn(*a); }));
    }
    std::vector<Status> out;
    for (auto& r : results) out.push_back(r.get());
    return out;
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<CoordinationService> service_;
  std::unique_ptr<CoordinationServer> server_;
};

TEST_F(CoordinationGrpcTest, RendezvousGivesEveryoneTheSameViewAndNcclId) {
  StartService(4);
  auto agents = ConnectAll(4, {2, 2, 2, 1});
  const ClusterView& view = agents[0]->cluster_view();
  EXPECT_EQ(view.world_size, 7);
  EXPECT_EQ(view.nccl_unique_id.size(), 128u);
  EXPECT_NE(view.nccl_unique_id, std::string(128, '\0'));
  EXPECT_FALSE(view.device_counts_match);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(agents[i]->task_index(), i);
    EXPECT_EQ(agents[i]->cluster_view(), view);  // identical bytes, ranks, generation
    EXPECT_EQ(view.tasks[i].rank_offset, 2 * i);
  }
  for (const Status& s : OnAll(agents, [](CoordinationAgent& a) { return a.Shutdown(); })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(CoordinationNcclUniqueIdTest, RealWhenBuiltWithCudaAndFreshEachTime) {
  auto a = GenerateNcclUniqueId();
  auto b = GenerateNcclUniqueId();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), 128u);
  EXPECT_NE(*a, *b);
}

TEST_F(CoordinationGrpcTest, KeyValueAndBarriers) {
  StartService(3);
  auto agents = ConnectAll(3);
  // Each task publishes its key, then reads every other one (waiting).
  auto results = OnAll(agents, [](CoordinationAgent& a) -> Status {
    const std::string me = std::to_string(a.task_index());
    MIRRORED_RETURN_IF_ERROR(a.KeyValueSet("test/addr/" + me, "value-" + me));
    for (int i = 0; i < 3; ++i) {
      MIRRORED_ASSIGN_OR_RETURN(std::string v,
                                a.KeyValueGet("test/addr/" + std::to_string(i), 5000));
      if (v != "value-" + std::to_string(i)) return InternalError("wrong value " + v);
    }
    MIRRORED_RETURN_IF_ERROR(a.Barrier("after-kv", 5000));
    return a.Barrier("after-kv", 5000);  // names are reusable
  });
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(agents[0]->KeyValueSet("test/addr/1", "x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(agents[0]->KeyValueTryGet("test/none").status().code(), StatusCode::kNotFound);
  Status timeout = agents[1]->KeyValueGet("test/never", 200).status();
  EXPECT_EQ(timeout.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(timeout.message().find("test/never"), std::string::npos);
  Status lonely = agents[2]->Barrier("lonely", 200);
  EXPECT_EQ(lonely.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(lonely.message().find("chief:0"), std::string::npos) << lonely;
  OnAll(agents, [](CoordinationAgent& a) { return a.Shutdown(); });
}

TEST_F(CoordinationGrpcTest, WrongTokenIsRefusedAndLearnsNothing) {
  StartService(2);
  for (const std::string token : {"", "wrong-token"}) {
    CoordinationClient client(CoordinationClient::MakeChannel(server_->bound_address()), token);
    rpc::RegisterRequest reg;
    reg.set_task("chief:0");
    reg.set_incarnation(1);
    reg.set_device_count(1);
    auto r = client.Register(reg, 2000);
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status();
    EXPECT_EQ(r.status().message().find("chief"), std::string::npos);  // nothing about the job
    rpc::KeyValueGetRequest get;
    get.set_key("any");
    EXPECT_EQ(client.KeyValueGet(get, 2000).status().code(), StatusCode::kUnauthenticated);
  }
  // The refused Register did not touch the service.
  EXPECT_EQ(service_->task_state("chief:0"), TaskState::kUnregistered);
}

// From the chief's side, a host started with another token looks like one
// that never started: the registration timeout names the refused callers,
// and is a configuration error (exit 2: no restart brings the right token).
TEST_F(CoordinationGrpcTest, RegistrationTimeoutNamesHostsRefusedForTheirToken) {
  StartService(2, /*registration_timeout_ms=*/1500);
  CoordinationAgent chief(AgentOptions("chief:0"));
  auto chief_result = std::async(std::launch::async, [&] { return chief.Connect(); });
  CoordinationAgentOptions other = AgentOptions("worker:0");
  other.job_token = "another-token";
  other.registration_timeout_ms = 1000;
  Status refused = CoordinationAgent(other).Connect();
  EXPECT_EQ(refused.code(), StatusCode::kUnauthenticated) << refused;
  Status s = chief_result.get();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("tasks never registered: worker:0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("calls refused for a missing or wrong job token came from 127.0.0.1 ("),
            std::string::npos)
      << s;
}

TEST_F(CoordinationGrpcTest, PortInUseIsAClearError) {
  StartService(1);
  auto other = CoordinationServer::Start(server_->bound_address(), kToken, service_.get());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(other.status().message().find(server_->bound_address()), std::string::npos)
      << other.status();
}

TEST_F(CoordinationGrpcTest, RegistrationTimeoutNamesMissingTaskOverGrpc) {
  StartService(3, /*registration_timeout_ms=*/500);
  CoordinationAgent chief(AgentOptions("chief:0"));
  CoordinationAgent w0(AgentOptions("worker:0"));
  auto w0_result = std::async(std::launch::async, [&] { return w0.Connect(); });
  Status s = chief.Connect();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("worker:1"), std::string::npos) << s;
  EXPECT_EQ(w0_result.get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ExitCodeFor(s), kExitTimeout);
}

// As mirrored-worker sets them up: the chief's agent and its service share
// one registration timeout. The service's verdict, naming the task that never
// came, must be what the chief reports, not its own RPC's timeout.
TEST_F(CoordinationGrpcTest, ChiefWithTheServicesOwnTimeoutStillNamesTheMissingTask) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    StartService(2, /*registration_timeout_ms=*/400);
    CoordinationAgentOptions o = AgentOptions("chief:0");
    o.registration_timeout_ms = 400;
    CoordinationAgent chief(o);
    Status s = chief.Connect();
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
    EXPECT_NE(s.message().find("tasks never registered: worker:0"), std::string::npos) << "attempt " << attempt << ": " << s;
    server_->Stop();
    server_.reset();
  }
}

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
  o.registration_timeout_ms = 4000;
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
  o.registration_timeout_ms = 500;
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
  o.registration_timeout_ms = 60000;
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
  o.registration_timeout_ms = 60000;
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
  o.registration_timeout_ms = 300;
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
  o.registration_timeout_ms = 60000;
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

// A task the service gave up on (no heartbeat past the timeout: frozen,
// starved) learns it on its error poll: its own failure (Unavailable, exit
// 1), saying so, not "task <itself> failed" as if a peer had.
TEST_F(CoordinationGrpcTest, ATaskDeclaredFailedSaysItWasThisTask) {
  StartService(2);
  CoordinationAgent chief(AgentOptions("chief:0"));
  CoordinationAgentOptions quiet = AgentOptions("worker:0");
  quiet.heartbeat_interval_ms = 60000;  // no heartbeat within the service's 1 s
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
      o.heartbeat_interval_ms = 60000;
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

// Something else answers at the chief's address (a gRPC server without the
// service; an HTTP server's 404 is the same status): the error says so.
TEST_F(CoordinationGrpcTest, AnotherServerAtTheChiefsAddressIsNamedAsNotTheService) {
  // Answers every call as a server without the method does.
  class NoSuchMethod : public grpc::CallbackGenericService {
    grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
      class Reactor : public grpc::ServerGenericBidiReactor {
       public:
        Reactor() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
        void OnDone() override { delete this; }
      };
      return new Reactor;
    }
  } service;
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(&service);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> other = builder.BuildAndStart();
  ASSERT_NE(other, nullptr);
  ASSERT_GT(port, 0);
  StartService(1);
  CoordinationAgentOptions o = AgentOptions("chief:0");
  o.service_address = "127.0.0.1:" + std::to_string(port);
  o.registration_timeout_ms = 3000;
  CoordinationAgent agent(o);
  const Status s = agent.Connect();
  EXPECT_EQ(ExitCodeFor(s), kExitUsage) << s;
  EXPECT_NE(s.message().find("is not mirrored's coordination service"), std::string::npos) << s;
  other->Shutdown();
}

// The chief's service cannot listen: an address that is not this machine's
// is the cluster's mistake (exit 2); a port in use may be freed (exit 1).
TEST_F(CoordinationGrpcTest, BindFailuresSayWhy) {
  StartService(1);
  CoordinationServiceOptions o;
  o.tasks = {"chief:0"};
  auto service = CoordinationService::Create(o);
  ASSERT_TRUE(service.ok());
  // TEST-NET-2, never an address of this machine (unless the kernel lets
  // any address be bound: net.ipv4.ip_nonlocal_bind). Waited for 5 s first.
  std::ifstream nonlocal("/proc/sys/net/ipv4/ip_nonlocal_bind");
  int nonlocal_bind = 0;
  nonlocal >> nonlocal_bind;
  if (nonlocal_bind == 0) {
    auto foreign = CoordinationServer::Start("198.51.100.7:0", kToken, service->get());
    ASSERT_FALSE(foreign.ok());
    EXPECT_EQ(ExitCodeFor(foreign.status()), kExitUsage) << foreign.status();
    EXPECT_NE(foreign.status().message().find("the host is not an address of this machine"), std::string::npos)
        << foreign.status();
  }
  // The port of the server StartService started.
  auto taken = CoordinationServer::Start(server_->bound_address(), kToken, service->get());
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(ExitCodeFor(taken.status()), kExitFailure) << taken.status();
  EXPECT_NE(taken.status().message().find("the port is in use"), std::string::npos) << taken.status();
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
