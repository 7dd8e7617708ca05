// Gloo rendezvous through the coordination service's key-value store,
// followed by a real Gloo ring all-reduce over TCP on loopback — ranks as
// threads, each with its own agent.
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <future>

#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_gloo_store.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"

namespace mirrored::coordination {
namespace {

constexpr int kTasks = 4;
constexpr int kCount = 1000;

TEST(CoordinationGlooStoreTest, RendezvousThenAllreduceRing) {
  CoordinationServiceOptions so;
  for (int i = 0; i < kTasks; ++i) so.tasks.push_back("worker:" + std::to_string(i));
  so.heartbeat_timeout = std::chrono::milliseconds(2000);
  auto service = CoordinationService::Create(so);
  ASSERT_TRUE(service.ok());
  (*service)->StartDeadlineThread();
  auto server = CoordinationServer::Start("127.0.0.1:0", "tok", service->get());
  ASSERT_TRUE(server.ok()) << server.status();

  auto rank_main = [&](int task) -> Status {
    CoordinationAgentOptions o;
    o.service_address = (*server)->bound_address();
    o.task_name = "worker:" + std::to_string(task);
    o.job_token = "tok";
    o.heartbeat_interval = std::chrono::milliseconds(200);
    o.heartbeat_timeout = std::chrono::milliseconds(2000);
    CoordinationAgent agent(o);
    MIRRORED_RETURN_IF_ERROR(agent.Connect());
    const int rank = static_cast<int>(agent.cluster_view().tasks[agent.task_index()].rank_offset);
    const int world = static_cast<int>(agent.cluster_view().world_size);
    CoordinationGlooStore store(&agent, "test-allreduce", std::chrono::seconds(10));
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    try {
      context->connectFullMesh(store, device);
      std::vector<float> data(kCount);
      for (int i = 0; i < kCount; ++i) data[i] = static_cast<float>(rank * kCount + i);
      gloo::AllreduceRing<float> allreduce(context, {data.data()}, kCount);
      allreduce.run();
      for (int i = 0; i < kCount; ++i) {
        // sum over r of (r * kCount + i)
        const float want = static_cast<float>(kCount * (world * (world - 1) / 2) + world * i);
        if (data[i] != want) {
          return InternalError("rank " + std::to_string(rank) + " element " + std::to_string(i) +
                               " = " + std::to_string(data[i]) + ", want " +
                               std::to_string(want));
        }
      }
    } catch (const std::exception& e) {
      return InternalError(std::string("gloo: ") + e.what());
    }
    return agent.Shutdown();
  };
  std::vector<std::future<Status>> ranks;
  for (int t = 0; t < kTasks; ++t) ranks.push_back(std::async(std::launch::async, rank_main, t));
  for (auto& r : ranks) EXPECT_TRUE(r.get().ok());
}

TEST(CoordinationGlooStoreTest, StoreErrorsBecomeGlooExceptionsNamingTheKey) {
  CoordinationServiceOptions so;
  so.tasks = {"chief:0"};
  auto service = CoordinationService::Create(so);
  ASSERT_TRUE(service.ok());
  (*service)->StartDeadlineThread();
  auto server = CoordinationServer::Start("127.0.0.1:0", "", service->get());
  ASSERT_TRUE(server.ok());
  CoordinationAgentOptions o;
  o.service_address = (*server)->bound_address();
  o.task_name = "chief:0";
  CoordinationAgent agent(o);
  ASSERT_TRUE(agent.Connect().ok());
  CoordinationGlooStore store(&agent, "comm", std::chrono::milliseconds(200));
  store.set("k", {'a'});
  EXPECT_EQ(store.get("k"), std::vector<char>{'a'});
  try {
    store.get("absent");
    ADD_FAILURE() << "get of an absent key returned";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find(store.prefix() + "absent"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("DEADLINE_EXCEEDED"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store.set("k", {'b'}), gloo::IoException);  // no silent overwrite
  EXPECT_TRUE(agent.Shutdown().ok());
}

}  // namespace
}  // namespace mirrored::coordination
