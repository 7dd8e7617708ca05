// HierarchicalProcessGroup: 2 "hosts" x 2 and 1 + 3 processes as threads,
// shared memory within a host and Gloo between the hosts' leaders.
#include "worker/comm/hierarchical_process_group.h"

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "worker/comm/gloo_process_group.h"
#include "worker/comm/half_conversion.h"
#include "worker/comm/shared_memory_process_group.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

TEST(HostLayoutTest, HostsAreNumberedInTheOrderOfTheirFirstProcess) {
  const HostLayout layout = HostLayout::FromHostKeys({"b", "a", "b", "c", "a"});
  EXPECT_EQ(layout.host_of, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(layout.local_rank_of, (std::vector<int>{0, 0, 1, 0, 1}));
  EXPECT_EQ(layout.leader_of_host, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(layout.size_of_host, (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(layout.hosts(), 3);
}

// Every process of `keys` as a thread, running fn(its group).
void RunHosts(const std::vector<std::string>& keys, const std::function<void(ProcessGroup&)>& fn) {
  const HostLayout layout = HostLayout::FromHostKeys(keys);
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < static_cast<int>(keys.size()); ++rank) {
    threads.emplace_back([&, rank] {
      const int host = layout.host_of[rank];
      auto shm = SharedMemoryProcessGroup::Connect(
          store, {.rank = layout.local_rank_of[rank], .size = layout.size_of_host[host],
                  .prefix = "shm/" + std::to_string(host), .timeout = 20s, .slot_bytes = 256});
      ASSERT_TRUE(shm.ok()) << shm.status();
      std::unique_ptr<ProcessGroup> leaders;
      if (layout.leader_of_host[host] == rank) {
        auto gloo = GlooProcessGroup::Connect(store, {.rank = host, .size = layout.hosts(), .prefix = "leaders"});
        ASSERT_TRUE(gloo.ok()) << gloo.status();
        leaders = std::move(gloo).value();
      }
      HierarchicalProcessGroup group(rank, layout, std::move(shm).value(), std::move(leaders));
      fn(group);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(HierarchicalProcessGroupTest, AllReduceBroadcastAndBarrierSpanEveryHost) {
  for (const std::vector<std::string>& keys :
       {std::vector<std::string>{"a", "a", "b", "b"}, {"a", "b", "b", "b"}, {"a", "b", "a", "b", "a"}}) {
    const int size = static_cast<int>(keys.size());
    RunHosts(keys, [&](ProcessGroup& g) {
      EXPECT_EQ(g.size(), size);
      std::vector<float> data(1000);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(g.rank() + 1) + static_cast<float>(i);
      ASSERT_TRUE(g.AllReduce(data.data(), data.size(), ReduceOp::kSum).ok());
      for (size_t i = 0; i < data.size(); ++i) {
        ASSERT_EQ(data[i], static_cast<float>(size * (size + 1) / 2) + static_cast<float>(size * i)) << i;
      }
      for (int root = 0; root < size; ++root) {
        std::vector<float> b(300, static_cast<float>(g.rank()));
        ASSERT_TRUE(g.Broadcast(b.data(), b.size(), root).ok());
        for (float v : b) ASSERT_EQ(v, static_cast<float>(root)) << "root " << root;
        ASSERT_TRUE(g.Barrier().ok());
      }
    });
  }
}

// --allreduce-dtype: each host's sum of rounded contributions is rounded to
// travel between the leaders (two hosts: one FP32 hop, rounded once).
TEST(HierarchicalProcessGroupTest, SixteenBitAllReduceRoundsEachHostsSum) {
  auto gradient = [](int rank, size_t i) {
    return 1.0f + 0.0137f * static_cast<float>(rank) + 0.00071f * static_cast<float>(i % 101);
  };
  auto rounded = [](float x) {
    RoundToWire(WireType::kBf16, &x, 1);
    return x;
  };
  for (const std::vector<std::string>& keys :
       {std::vector<std::string>{"a", "a", "b", "b"}, {"a", "b", "a", "b", "a"}}) {
    RunHosts(keys, [&](ProcessGroup& g) {
      std::vector<float> data(1000);
      for (size_t i = 0; i < data.size(); ++i) data[i] = gradient(g.rank(), i);
      ASSERT_TRUE(g.AllReduceAs(WireType::kBf16, data.data(), data.size(), ReduceOp::kSum).ok());
      for (size_t i = 0; i < data.size(); ++i) {
        float host_a = 0, host_b = 0;  // each host's processes in rank order
        for (size_t r = 0; r < keys.size(); ++r) (keys[r] == "a" ? host_a : host_b) += rounded(gradient(int(r), i));
        ASSERT_EQ(data[i], rounded(rounded(host_a) + rounded(host_b))) << i;
      }
    });
  }
}

}  // namespace
}  // namespace mirrored
