// SharedMemoryProcessGroup: members as threads of this process (the segment
// opened through /proc/self/fd) and as forked processes meeting through a
// file store; sums, chunking, broadcast, deadlines, abort, no leftovers.
#include "worker/comm/shared_memory_process_group.h"

#include <dirent.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "worker/comm/half_conversion.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

// `size` members as threads, each running fn(its group).
void RunMembers(int size, const SharedMemoryProcessGroupOptions& base,
                const std::function<void(SharedMemoryProcessGroup&)>& fn) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      SharedMemoryProcessGroupOptions options = base;
      options.rank = r;
      options.size = size;
      auto group = SharedMemoryProcessGroup::Connect(store, options);
      ASSERT_TRUE(group.ok()) << group.status();
      fn(**group);
    });
  }
  for (auto& t : threads) t.join();
}

float Input(int rank, size_t i) { return static_cast<float>(rank + 1) * 0.25f + static_cast<float>(i % 97); }

TEST(SharedMemoryProcessGroupTest, AllReduceSumsInRankOrderAcrossChunks) {
  for (int size : {2, 3, 4}) {
    // 64-float slots: 1000 elements go in 16 chunks.
    for (size_t count : {size_t{1}, size_t{64}, size_t{1000}}) {
      RunMembers(size, {.timeout = 20s, .slot_bytes = 256}, [&](SharedMemoryProcessGroup& g) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = Input(g.rank(), i);
        ASSERT_TRUE(g.AllReduce(data.data(), count, ReduceOp::kSum).ok());
        for (size_t i = 0; i < count; ++i) {
          float expected = Input(0, i);
          for (int r = 1; r < size; ++r) expected += Input(r, i);  // the same order: bit-identical
          ASSERT_EQ(data[i], expected) << "size " << size << " count " << count << " i " << i;
        }
        std::vector<float> maxes(count, static_cast<float>(g.rank()));
        ASSERT_TRUE(g.AllReduce(maxes.data(), count, ReduceOp::kMax).ok());
        for (float m : maxes) ASSERT_EQ(m, static_cast<float>(size - 1));
      });
    }
  }
}

// Contributions whose float sum depends on the order: 1e8 and -1e8 cancel
// only when added before the small terms.
float OrderSensitive(int rank, size_t i) {
  const float big = (rank % 2 == 0 ? 1e8f : -1e8f) * static_cast<float>(1 + i % 3);
  return big + static_cast<float>(rank + 1) * static_cast<float>(i % 5) * 0.375f;
}

// Shares longer than the reduction's L1 block, and consecutive operations
// whose chunks and shares are cut differently (a slot is reused while the
// others may still read the previous result).
TEST(SharedMemoryProcessGroupTest, EveryMemberGetsTheRankOrderSumOfMixedCounts) {
  for (int size : {2, 3, 4}) {
    RunMembers(size, {.timeout = 20s, .slot_bytes = 64 << 10}, [&](SharedMemoryProcessGroup& g) {
      for (size_t count : {size_t{40000}, size_t{16384 * 2 + 7}, size_t{3}, size_t{16384}, size_t{9001}}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = OrderSensitive(g.rank(), i);
        ASSERT_TRUE(g.AllReduce(data.data(), count, ReduceOp::kSum).ok());
        for (size_t i = 0; i < count; ++i) {
          float expected = OrderSensitive(0, i);
          for (int r = 1; r < size; ++r) expected += OrderSensitive(r, i);
          ASSERT_EQ(data[i], expected) << "size " << size << " count " << count << " i " << i;
        }
      }
    });
  }
}

// --allreduce-dtype: every member's contribution rounded, summed in FP32 in
// rank order, the sum rounded once; the same bits on every member, across
// chunk boundaries.
TEST(SharedMemoryProcessGroupTest, SixteenBitAllReduceRoundsEachMemberAndTheSumOnce) {
  auto gradient = [](int rank, size_t i) {
    return (1.0f + 0.0137f * static_cast<float>(rank) + 0.00071f * static_cast<float>(i % 101)) *
           (i % 2 ? 1.0f : -0.125f);
  };
  auto rounded = [](WireType w, float x) {
    RoundToWire(w, &x, 1);
    return x;
  };
  for (WireType w : {WireType::kBf16, WireType::kFp16}) {
    for (int size : {2, 3}) {
      const size_t count = 1000;  // 64-float slots: several chunks
      RunMembers(size, {.timeout = 20s, .slot_bytes = 256}, [&](SharedMemoryProcessGroup& g) {
        std::vector<float> data(count), maxes(count);
        for (size_t i = 0; i < count; ++i) data[i] = maxes[i] = gradient(g.rank(), i);
        ASSERT_TRUE(g.AllReduceAs(w, data.data(), count, ReduceOp::kSum).ok());
        ASSERT_TRUE(g.AllReduceAs(w, maxes.data(), count, ReduceOp::kMax).ok());
        size_t rounded_away = 0;
        for (size_t i = 0; i < count; ++i) {
          float sum = 0, fp32 = 0, max = rounded(w, gradient(0, i));
          for (int r = 0; r < size; ++r) {
            sum += rounded(w, gradient(r, i));
            fp32 += gradient(r, i);
            max = std::max(max, rounded(w, gradient(r, i)));
          }
          ASSERT_EQ(data[i], rounded(w, sum)) << WireTypeName(w) << " size " << size << " i " << i;
          ASSERT_EQ(maxes[i], max) << WireTypeName(w) << " size " << size << " i " << i;
          rounded_away += data[i] != fp32;
        }
        EXPECT_GT(rounded_away, count / 2) << "nothing was rounded";
      });
    }
  }
}

TEST(SharedMemoryProcessGroupTest, BroadcastFromAnyRootAndBarrier) {
  RunMembers(3, {.timeout = 20s, .slot_bytes = 128}, [](SharedMemoryProcessGroup& g) {
    for (int root = 0; root < 3; ++root) {
      std::vector<float> data(100, static_cast<float>(g.rank() * 10));
      ASSERT_TRUE(g.Broadcast(data.data(), data.size(), root).ok());
      for (float v : data) ASSERT_EQ(v, static_cast<float>(root * 10));
      ASSERT_TRUE(g.Barrier().ok());
    }
    std::vector<float> one(1);
    EXPECT_EQ(g.Broadcast(one.data(), 1, 3).code(), StatusCode::kInvalidArgument);
  });
}

TEST(SharedMemoryProcessGroupTest, AMissingMemberIsADeadlineNamingTheOperation) {
  // The timeout bounds Connect's rendezvous too: 300 ms was tight for it
  // on a loaded machine (the test failed once there).
  RunMembers(2, {.timeout = 2s}, [](SharedMemoryProcessGroup& g) {
    if (g.rank() == 1) return;  // never calls the collective
    std::vector<float> data(8, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    Status s = g.AllReduce(data.data(), data.size(), ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("shared-memory all-reduce #1: not every one of the 1 other process(es) of this host "
                               "came within "),
              std::string::npos)
        << s;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
}

TEST(SharedMemoryProcessGroupTest, AbortByOneMemberWakesTheOthersAtOnce) {
  RunMembers(3, {.timeout = 60s}, [](SharedMemoryProcessGroup& g) {
    if (g.rank() == 2) {
      std::this_thread::sleep_for(200ms);  // (the others are waiting by then; not a synchronisation)
      g.Abort();
      return;
    }
    std::vector<float> data(8, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    Status s = g.AllReduce(data.data(), data.size(), ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_EQ(g.Barrier().code(), StatusCode::kAborted);  // and every later operation
  });
}

std::set<std::string> DevShm() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

// Real processes: the segment crosses through /proc/<pid>/fd, and nothing
// of it is left in /dev/shm, even after a member is SIGKILLed.
TEST(SharedMemoryProcessGroupTest, ForkedProcessesReduceAndLeaveNoSegmentBehind) {
  const std::string dir = testing::TempDir() + "/shm-store-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::set<std::string> before = DevShm();
  constexpr int kSize = 3;
  std::vector<pid_t> children;
  for (int r = 0; r < kSize; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      gloo::rendezvous::FileStore store(dir);
      auto group = SharedMemoryProcessGroup::Connect(store, {.rank = r, .size = kSize, .timeout = 20s});
      if (!group.ok()) _exit(10);
      std::vector<float> data(300000, static_cast<float>(r + 1));  // 1.2 MB: one chunk
      if (!(*group)->AllReduce(data.data(), data.size(), ReduceOp::kSum).ok()) _exit(11);
      for (float v : data)
        if (v != 6.0f) _exit(12);
      if (r == kSize - 1) {
        raise(SIGKILL);  // dies holding its mapping
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (int r = 0; r < kSize; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(children[r], &status, 0), children[r]);
    if (r == kSize - 1) {
      EXPECT_TRUE(WIFSIGNALED(status));
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "member " << r << ": " << status;
    }
  }
  EXPECT_EQ(DevShm(), before);
  std::filesystem::remove_all(dir);
}

TEST(SharedMemoryProcessGroupTest, BadOptionsAreRefused) {
  gloo::rendezvous::HashStore store;
  EXPECT_EQ(SharedMemoryProcessGroup::Connect(store, {.rank = 2, .size = 2}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMemoryProcessGroup::Connect(store, {.rank = 0, .size = 1, .slot_bytes = 100}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(SameHostIdentity().empty());
  EXPECT_EQ(SameHostIdentity(), SameHostIdentity());
}

}  // namespace
}  // namespace mirrored
