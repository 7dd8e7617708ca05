// The coordination service over real gRPC on loopback, with agents as
// threads, as the job forms and runs: rendezvous, NCCL id, key-value store,
// barriers, token checks, registration timeouts, port clashes and bind
// failures, another server at the chief's address, the exit barrier. (A task
// another process holds: coordination_grpc_claim_test.cc; failure
// propagation: coordination_grpc_failure_test.cc.)
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/coordination/coordination_grpc_test_util.h"
#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_client.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/coordination/nccl_unique_id.h"

namespace mirrored::coordination {
namespace {

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
  other.registration_timeout = std::chrono::milliseconds(1000);
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
    o.registration_timeout = std::chrono::milliseconds(400);
    CoordinationAgent chief(o);
    Status s = chief.Connect();
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
    EXPECT_NE(s.message().find("tasks never registered: worker:0"), std::string::npos) << "attempt " << attempt << ": " << s;
    server_->Stop();
    server_.reset();
  }
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
  o.registration_timeout = std::chrono::milliseconds(3000);
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

}  // namespace
}  // namespace mirrored::coordination
