// CheckedProcessGroup over real Gloo pairs (loopback TCP, threads standing
// in for processes): matching operations pass through; the first one that
// differs fails on every process at once, naming what each task ran,
// instead of hanging until the collective timeout.
#include "worker/comm/checked_process_group.h"

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "worker/comm/gloo_process_group.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

// Runs fn(rank, group) for two "processes" with checked groups.
void OnTwoCheckedProcesses(std::chrono::milliseconds timeout,
                           const std::function<void(int, CheckedProcessGroup&)>& fn) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      auto pg = GlooProcessGroup::Connect(store, {.rank = p, .size = 2, .prefix = "checked", .timeout = timeout});
      ASSERT_TRUE(pg.ok()) << pg.status();
      CheckedProcessGroup checked(std::move(pg).value(), {"worker:0", "worker:1"});
      fn(p, checked);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(CheckedProcessGroupTest, MatchingOperationsGiveTheInnerGroupsResults) {
  OnTwoCheckedProcesses(20s, [](int rank, CheckedProcessGroup& pg) {
    EXPECT_EQ(pg.rank(), rank);
    EXPECT_EQ(pg.size(), 2);
    // 2^24 + 3 elements would need 64 MiB: the two halves of the count are
    // exercised by a count past 2^24 in the mismatch test instead.
    std::vector<float> v = {float(rank + 1), 10.0f * float(rank)};
    ASSERT_TRUE(pg.AllReduce(v.data(), v.size(), ReduceOp::kSum).ok());
    EXPECT_EQ(v, (std::vector<float>{3.0f, 10.0f}));
    std::vector<float> w = {float(rank)};
    ASSERT_TRUE(pg.Broadcast(w.data(), 1, /*root_process=*/1).ok());
    EXPECT_EQ(w[0], 1.0f);
    ASSERT_TRUE(pg.Barrier().ok());
  });
}

TEST(CheckedProcessGroupTest, ADifferentOperationFailsEveryProcessNamingWhatEachRan) {
  // A 60 s timeout: without the check, broadcast against all-reduce would
  // wait for it; with it, both fail at the check.
  const auto started = std::chrono::steady_clock::now();
  std::vector<Status> results(2);
  OnTwoCheckedProcesses(60s, [&](int rank, CheckedProcessGroup& pg) {
    std::vector<float> v(8, 1.0f);
    ASSERT_TRUE(pg.AllReduce(v.data(), v.size(), ReduceOp::kSum).ok());
    results[static_cast<size_t>(rank)] = rank == 0 ? pg.AllReduce(v.data(), v.size(), ReduceOp::kMax)
                                                   : pg.Broadcast(v.data(), v.size(), 0);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("collective #2 differs across tasks: worker:0 ran all-reduce (max) of 8 floats; "
                               "worker:1 ran broadcast from worker:0 of 8 floats"),
              std::string::npos)
        << s;
  }
}

TEST(CheckedProcessGroupTest, SizesAndBarriersAreCompared) {
  std::vector<Status> results(2);
  OnTwoCheckedProcesses(60s, [&](int rank, CheckedProcessGroup& pg) {
    // Counts past 2^24 travel in two halves. The buffers are as large as
    // said: were the check broken, Gloo would run on them.
    std::vector<float> v(rank == 0 ? (size_t{1} << 24) + 5 : 5);
    results[static_cast<size_t>(rank)] = pg.AllReduce(v.data(), v.size(), ReduceOp::kSum);
  });
  for (const Status& s : results) {
    EXPECT_NE(s.message().find("worker:0 ran all-reduce (sum) of 16777221 floats; worker:1 ran all-reduce (sum) of 5 "
                               "floats"),
              std::string::npos)
        << s;
  }
  OnTwoCheckedProcesses(60s, [&](int rank, CheckedProcessGroup& pg) {
    std::vector<float> v(3);
    results[static_cast<size_t>(rank)] = rank == 0 ? pg.Barrier() : pg.AllReduce(v.data(), 3, ReduceOp::kAvg);
  });
  for (const Status& s : results) {
    EXPECT_NE(s.message().find("worker:0 ran a barrier; worker:1 ran all-reduce (avg) of 3 floats"), std::string::npos)
        << s;
  }
}

TEST(CheckedProcessGroupTest, WireTypesAreCompared) {
  std::vector<Status> results(2);
  OnTwoCheckedProcesses(60s, [&](int rank, CheckedProcessGroup& pg) {
    std::vector<float> v(6, 1.5f);
    ASSERT_TRUE(pg.AllReduceAs(WireType::kBf16, v.data(), v.size(), ReduceOp::kSum).ok());
    EXPECT_EQ(v, std::vector<float>(6, 3.0f));
    results[static_cast<size_t>(rank)] =
        pg.AllReduceAs(rank == 0 ? WireType::kFp16 : WireType::kFp32, v.data(), v.size(), ReduceOp::kSum);
  });
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("worker:0 ran all-reduce (sum) of 6 floats as fp16; worker:1 ran all-reduce (sum) "
                               "of 6 floats."),
              std::string::npos)
        << s;
  }
}

}  // namespace
}  // namespace mirrored
