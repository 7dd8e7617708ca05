#include "worker/comm/cpu_replica_group.h"

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <thread>

#include "worker/comm/gloo_process_group.h"
#include "worker/comm/half_conversion.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

// A job of several worker "processes" (here: groups of threads in this
// process), each with its own CpuReplicaGroup, joined by Gloo over loopback
// TCP through an in-memory store.
class Job {
 public:
  explicit Job(std::vector<int> replicas_per_process, std::chrono::milliseconds timeout = 20s)
      : replicas_(std::move(replicas_per_process)) {
    const int processes = static_cast<int>(replicas_.size());
    pgs_.resize(processes);
    if (processes > 1) {
      std::vector<std::thread> connect;
      for (int p = 0; p < processes; ++p) {
        connect.emplace_back([&, p] {
          auto pg = GlooProcessGroup::Connect(store_, {.rank = p, .size = processes, .prefix = "test",
                                                       .timeout = timeout});
          ASSERT_TRUE(pg.ok()) << pg.status();
          pgs_[p] = std::move(pg).value();
        });
      }
      for (auto& t : connect) t.join();
    }
    for (int p = 0; p < processes; ++p) {
      groups_.push_back(std::make_unique<CpuReplicaGroup>(
          CpuReplicaGroupOptions{replicas_, p, timeout}, pgs_[p].get()));
    }
  }

  // Runs fn(comm) on every replica, each in its own thread.
  void RunOnAllReplicas(const std::function<void(Communicator&)>& fn) {
    std::vector<std::thread> threads;
    for (auto& g : groups_)
      for (int r = 0; r < g->local_replicas(); ++r) threads.emplace_back([&, r, gp = g.get()] { fn(gp->replica(r)); });
    for (auto& t : threads) t.join();
  }
  CpuReplicaGroup& group(int p) { return *groups_[p]; }

 private:
  std::vector<int> replicas_;
  gloo::rendezvous::HashStore store_;
  std::vector<std::unique_ptr<GlooProcessGroup>> pgs_;
  std::vector<std::unique_ptr<CpuReplicaGroup>> groups_;
};

// Element i of replica r's input: distinct per replica and element.
float Input(int rank, size_t i) { return static_cast<float>((rank + 1) * 0.25 + static_cast<double>(i % 97) * 0.5); }

void ExpectAllReduce(std::vector<int> layout, size_t n) {
  Job job(layout);
  const int world = std::accumulate(layout.begin(), layout.end(), 0);
  std::mutex mu;
  std::vector<std::vector<float>> sums, avgs, maxes;
  job.RunOnAllReplicas([&](Communicator& comm) {
    EXPECT_EQ(comm.world_size(), world);
    std::vector<float> s(n), a(n), m(n);
    for (size_t i = 0; i < n; ++i) s[i] = a[i] = m[i] = Input(comm.rank(), i);
    ASSERT_TRUE(comm.AllReduce(s.data(), n, ReduceOp::kSum).ok());
    ASSERT_TRUE(comm.AllReduce(a.data(), n, ReduceOp::kAvg).ok());
    ASSERT_TRUE(comm.AllReduce(m.data(), n, ReduceOp::kMax).ok());
    std::lock_guard<std::mutex> lock(mu);
    sums.push_back(s);
    avgs.push_back(a);
    maxes.push_back(m);
  });
  ASSERT_EQ(sums.size(), static_cast<size_t>(world));
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < world; ++r) want += Input(r, i);
    ASSERT_NEAR(sums[0][i], want, 1e-3) << "element " << i;
    ASSERT_NEAR(avgs[0][i], want / world, 1e-4) << "element " << i;
    ASSERT_EQ(maxes[0][i], Input(world - 1, i)) << "element " << i;
  }
  // Every replica holds bit-identical results.
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(sums[r], sums[0]) << "replica " << r;
    EXPECT_EQ(avgs[r], avgs[0]) << "replica " << r;
    EXPECT_EQ(maxes[r], maxes[0]) << "replica " << r;
  }
}

TEST(CpuReplicaGroupTest, AllReduceOneProcessFourReplicas) { ExpectAllReduce({4}, 1000); }
TEST(CpuReplicaGroupTest, AllReduceTwoProcessesTwoReplicasEach) { ExpectAllReduce({2, 2}, 100003); }
TEST(CpuReplicaGroupTest, AllReduceUnevenReplicaCounts) { ExpectAllReduce({1, 3}, 4097); }
TEST(CpuReplicaGroupTest, AllReduceFewerElementsThanReplicas) { ExpectAllReduce({3}, 2); }

TEST(CpuReplicaGroupTest, BroadcastFromAnyRoot) {
  for (int root : {0, 2, 3}) {
    Job job({2, 2});
    std::mutex mu;
    std::vector<std::vector<float>> results;
    job.RunOnAllReplicas([&](Communicator& comm) {
      std::vector<float> w(513);
      for (size_t i = 0; i < w.size(); ++i) w[i] = Input(comm.rank(), i);
      ASSERT_TRUE(comm.Broadcast(w.data(), w.size(), root).ok());
      ASSERT_TRUE(comm.Barrier().ok());
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(w);
    });
    for (const auto& w : results)
      for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], Input(root, i)) << "root " << root;
  }
}

TEST(CpuReplicaGroupTest, MissingReplicaTimesOutNamingIt) {
  Job job({3}, 200ms);
  std::vector<Status> statuses(2);
  auto start = std::chrono::steady_clock::now();
  std::thread a([&] { float x = 1; statuses[0] = job.group(0).replica(0).AllReduce(&x, 1, ReduceOp::kSum); });
  std::thread b([&] { float x = 1; statuses[1] = job.group(0).replica(1).AllReduce(&x, 1, ReduceOp::kSum); });
  a.join();
  b.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("all-reduce #1 (sum, 1 floats) failed after"), std::string::npos) << s;
    EXPECT_NE(s.message().find("for local replicas [2] (2 of 3 arrived)"), std::string::npos) << s;
  }
}

TEST(CpuReplicaGroupTest, AbortWakesWaitersWithTheReason) {
  Job job({2});
  Status waiting;
  std::thread t([&] { waiting = job.group(0).replica(0).Barrier(); });
  // Abort from another thread (what the coordination agent's error callback
  // does); the waiter may or may not have arrived yet: both paths must fail.
  job.group(0).Abort(AbortedError("task worker:1 failed: exit code 1"));
  t.join();
  EXPECT_EQ(waiting.code(), StatusCode::kAborted);
  EXPECT_NE(waiting.message().find("task worker:1 failed: exit code 1"), std::string::npos) << waiting;
  float x = 0;
  EXPECT_EQ(job.group(0).replica(1).AllReduce(&x, 1, ReduceOp::kSum).code(), StatusCode::kAborted);
}

// A replica that returned from its function never comes to a collective
// another replica waits in: that fails at once, naming it, not at the
// timeout; Starting() readmits it for the next round.
TEST(CpuReplicaGroupTest, AReplicaThatReturnedIsNotWaitedFor) {
  Job job({2}, 60s);
  Status waiting;
  std::thread t([&] { waiting = job.group(0).replica(0).Barrier(); });
  job.group(0).Returned(1);  // before or after replica 0 arrives: both paths must fail
  t.join();
  EXPECT_EQ(waiting.code(), StatusCode::kInternal) << waiting;
  EXPECT_NE(waiting.message().find("barrier #1 failed after"), std::string::npos) << waiting;
  EXPECT_NE(waiting.message().find("local replica 1 returned from the replica function while replica 0 waits for it"),
            std::string::npos)
      << waiting;
}

TEST(CpuReplicaGroupTest, ReplicasThatAllReturnedStartAgain) {
  Job job({2}, 60s);
  for (int round = 0; round < 2; ++round) {
    job.group(0).Starting();
    std::vector<Status> statuses(2);
    std::vector<float> sums(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        float x = static_cast<float>(r + 1 + round);
        statuses[r] = job.group(0).replica(r).AllReduce(&x, 1, ReduceOp::kSum);
        sums[r] = x;
        job.group(0).Returned(r);
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << "round " << round << ": " << s;
    for (float sum : sums) EXPECT_EQ(sum, static_cast<float>(3 + 2 * round)) << "round " << round;
  }
}

TEST(CpuReplicaGroupTest, MismatchedCollectivesFailLoudly) {
  Job job({2});
  std::vector<Status> statuses(2);
  std::thread a([&] { std::vector<float> x(4); statuses[0] = job.group(0).replica(0).AllReduce(x.data(), 4, ReduceOp::kSum); });
  std::thread b([&] { std::vector<float> x(5); statuses[1] = job.group(0).replica(1).AllReduce(x.data(), 5, ReduceOp::kSum); });
  a.join();
  b.join();
  for (const Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(s.code() == StatusCode::kInternal || s.code() == StatusCode::kAborted) << s;
  }
}

// --allreduce-dtype bf16/fp16 (wire_type.h's rule). Element i of rank r's
// gradient: many mantissa bits, both signs, magnitudes from 1/16 to 16.
float Gradient(int rank, size_t i) {
  const float m = 1.0f + 0.0137f * static_cast<float>(rank) + 0.00071f * static_cast<float>(i % 101);
  return std::ldexp(i % 3 == 0 ? -m : m, static_cast<int>(i % 9) - 4);
}

float Rounded(WireType w, float x) {
  RoundToWire(w, &x, 1);
  return x;
}

// What the rule gives for element i with `layout`: each gradient rounded,
// each process's local sum in FP32 rounded (it travels), the processes'
// sums added in FP32 and rounded once (exact for up to 2 processes: Gloo's
// one hop); kAvg divides the rounded sum and rounds again.
float Rule(WireType w, const std::vector<int>& layout, size_t i, ReduceOp op) {
  float total = 0;
  int rank = 0;
  for (int replicas : layout) {
    float local = 0;
    for (int j = 0; j < replicas; ++j) local += Rounded(w, Gradient(rank++, i));
    total += Rounded(w, local);
  }
  total = Rounded(w, total);
  return op == ReduceOp::kAvg ? Rounded(w, total / static_cast<float>(rank)) : total;
}

// Every rank's result of one AllReduceAs of Gradient(rank, .), by rank.
std::vector<std::vector<float>> AllReduceGradients(const std::vector<int>& layout, WireType w, ReduceOp op, size_t n) {
  Job job(layout);
  const int world = std::accumulate(layout.begin(), layout.end(), 0);
  std::vector<std::vector<float>> results(static_cast<size_t>(world));
  job.RunOnAllReplicas([&](Communicator& comm) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = Gradient(comm.rank(), i);
    Status s = comm.AllReduceAs(w, g.data(), n, op);
    EXPECT_TRUE(s.ok()) << s;
    results[static_cast<size_t>(comm.rank())] = std::move(g);  // one slot per thread
  });
  return results;
}

void ExpectRule(const std::vector<int>& layout, WireType w, ReduceOp op) {
  const size_t n = 3001;
  const auto results = AllReduceGradients(layout, w, op, n);
  size_t rounded_away = 0;  // elements where the plain FP32 sum differs
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(results[0][i], Rule(w, layout, i, op)) << "element " << i;
    float fp32 = 0;
    for (size_t r = 0; r < results.size(); ++r) fp32 += Gradient(static_cast<int>(r), i);
    if (op == ReduceOp::kAvg) fp32 /= static_cast<float>(results.size());
    rounded_away += results[0][i] != fp32;
  }
  EXPECT_GT(rounded_away, n / 2) << "the 16-bit all-reduce computed the FP32 sums: nothing was rounded";
  for (size_t r = 1; r < results.size(); ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
}

TEST(CpuReplicaGroupTest, Bf16AllReduceInOneProcessRoundsEachReplicaAndTheSum) {
  ExpectRule({3}, WireType::kBf16, ReduceOp::kSum);
  ExpectRule({3}, WireType::kFp16, ReduceOp::kAvg);
}

TEST(CpuReplicaGroupTest, Fp16AllReduceAcrossProcessesTravelsOverGlooIn16Bits) {
  ExpectRule({1, 1}, WireType::kFp16, ReduceOp::kSum);
  ExpectRule({1, 1}, WireType::kBf16, ReduceOp::kAvg);
}

TEST(CpuReplicaGroupTest, Bf16AllReduceAcrossProcessesRoundsEachProcesssLocalSum) {
  ExpectRule({2, 2}, WireType::kBf16, ReduceOp::kSum);
  ExpectRule({1, 2}, WireType::kFp16, ReduceOp::kSum);
}

TEST(CpuReplicaGroupTest, OneProcessOfTwoReplicasEqualsTwoProcessesOfOne) {
  for (WireType w : {WireType::kBf16, WireType::kFp16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      EXPECT_EQ(AllReduceGradients({2}, w, op, 1001)[0], AllReduceGradients({1, 1}, w, op, 1001)[0])
          << WireTypeName(w) << " " << ReduceOpName(op);
    }
  }
}

TEST(CpuReplicaGroupTest, ReplicasAskingForDifferentWireTypesFailLoudly) {
  Job job({2});
  std::vector<Status> statuses(2);
  std::vector<float> x(4), y(4);
  std::thread a([&] { statuses[0] = job.group(0).replica(0).AllReduceAs(WireType::kBf16, x.data(), 4, ReduceOp::kSum); });
  std::thread b([&] { statuses[1] = job.group(0).replica(1).AllReduceAs(WireType::kFp16, y.data(), 4, ReduceOp::kSum); });
  a.join();
  b.join();
  for (const Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(s.code() == StatusCode::kInternal || s.code() == StatusCode::kAborted) << s;
  }
  EXPECT_NE(statuses[0].message().find("as bf16"), std::string::npos) << statuses[0];
}

}  // namespace
}  // namespace mirrored
