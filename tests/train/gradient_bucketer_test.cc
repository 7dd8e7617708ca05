#include "worker/train/gradient_bucketer.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "worker/comm/cpu_replica_group.h"

namespace mirrored {
namespace {

TEST(GradientBucketerTest, PlanIsReverseOrderContiguousAndTilesTheBuffer) {
  // Four tensors of 1000, 300000, 16, 500000 floats with 16-float alignment.
  std::vector<BucketSpan> spans = {{0, 1000}, {1008, 300000}, {301008, 16}, {301024, 500000}};
  GradientBucketerOptions o{.bucket_bytes = 1u << 20, .first_bucket_bytes = 64u << 10};
  auto plan = PlanGradientBuckets(spans, o);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].tensors, std::vector<int>{3});     // the last tensor alone: past the small first budget
  EXPECT_EQ(plan[0].begin, 301024u);
  EXPECT_EQ(plan[0].end, 801024u);
  EXPECT_EQ(plan[1].tensors, (std::vector<int>{2, 1}));  // 16 + 300000 floats reach 1 MiB
  EXPECT_EQ(plan[1].begin, 1008u);
  EXPECT_EQ(plan[1].end, 301024u);
  EXPECT_EQ(plan[2].tensors, std::vector<int>{0});
  EXPECT_EQ(plan[2].begin, 0u);
  EXPECT_EQ(plan[2].end, 1008u);                         // padding included
}

// Two replicas; each reports its tensors ready in reverse order and the
// bucketer's thread all-reduces the buckets while "backward" goes on.
TEST(GradientBucketerTest, ReducesEveryBucketAcrossReplicas) {
  std::vector<BucketSpan> spans = {{0, 100}, {112, 5000}, {5120, 7}, {5136, 40000}};
  const size_t total = 45136;
  CpuReplicaGroup group({{2}, 0}, nullptr);
  std::vector<std::vector<float>> grads(2, std::vector<float>(total, 0.0f));
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      GradientBucketer b(spans, grads[r].data(), &group.replica(r), {.bucket_bytes = 64u << 10, .first_bucket_bytes = 4096});
      for (int step = 0; step < 3; ++step) {
        for (const auto& s : spans)
          for (size_t i = 0; i < s.size; ++i) grads[r][s.offset + i] = static_cast<float>(r + 1 + step);
        b.BeginStep();
        for (int t = 3; t >= 0; --t) b.Ready(t);
        results[r] = b.Finish();
        if (!results[r].ok()) return;
        for (const auto& s : spans)
          for (size_t i = 0; i < s.size; ++i) {
            if (grads[r][s.offset + i] != static_cast<float>(3 + 2 * step)) {
              results[r] = InternalError("wrong sum at " + std::to_string(s.offset + i));
              return;
            }
          }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
}

TEST(GradientBucketerTest, MissingReadyIsReportedNotHung) {
  CpuReplicaGroup group({{1}, 0}, nullptr);
  std::vector<float> g(64);
  GradientBucketer b({{0, 16}, {16, 16}}, g.data(), &group.replica(0),
                     {.bucket_bytes = 64, .first_bucket_bytes = 64, .timeout = std::chrono::milliseconds(100)});
  b.BeginStep();
  b.Ready(1);
  Status s = b.Finish();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("still waits for 1 tensor(s)"), std::string::npos) << s;
}

// What a GPU replica's fence and communicator see, in order, from which thread.
class Recorder {
 public:
  void Log(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back({std::move(what), std::this_thread::get_id()});
  }
  // Index of the first entry `what`, or -1.
  int Find(const std::string& what) const {
    for (size_t i = 0; i < log_.size(); ++i)
      if (log_[i].first == what) return static_cast<int>(i);
    return -1;
  }
  std::thread::id ThreadOf(const std::string& what) const { return log_.at(static_cast<size_t>(Find(what))).second; }
  std::string Dump() const {
    std::string out;
    for (const auto& e : log_) out += e.first + "; ";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, std::thread::id>> log_;
};

class RecordingFence : public GradientFence {
 public:
  RecordingFence(Recorder* r, int fail_mark = -1, int fail_wait = -1)
      : r_(r), fail_mark_(fail_mark), fail_wait_(fail_wait) {}
  Status Mark(size_t b) override {
    r_->Log("mark " + std::to_string(b));
    if (static_cast<int>(b) == fail_mark_) return InternalError("cudaEventRecord failed (test)");
    return OkStatus();
  }
  Status Wait(size_t b) override {
    r_->Log("wait " + std::to_string(b));
    if (static_cast<int>(b) == fail_wait_) return InternalError("cudaStreamWaitEvent failed (test)");
    return OkStatus();
  }

 private:
  Recorder* r_;
  int fail_mark_, fail_wait_;
};

class RecordingCommunicator : public Communicator {
 public:
  RecordingCommunicator(Recorder* r, const float* base) : r_(r), base_(base) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status AllReduce(float* data, size_t count, ReduceOp) override {
    r_->Log("reduce " + std::to_string(data - base_) + "+" + std::to_string(count));
    return OkStatus();
  }
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override {
    r_->Log(std::string("as ") + WireTypeName(wire) + " " + std::to_string(data - base_));
    return AllReduce(data, count, op);
  }
  Status Broadcast(float*, size_t, int) override { return OkStatus(); }
  Status Barrier() override { return OkStatus(); }
  void Abort(const Status&) override {}

 private:
  Recorder* r_;
  const float* base_;
};

// With 64-byte budgets the plan is {3} [48, 64), {2, 1} [16, 48), {0} [0, 16):
// bucket 1 closes only when its second tensor is reported.
const std::vector<BucketSpan> kFenceSpans = {{0, 16}, {16, 16}, {32, 8}, {48, 16}};

TEST(GradientBucketerTest, FenceMarksOnTheBackwardThreadThenWaitsBeforeEachAllReduce) {
  Recorder rec;
  std::vector<float> g(64);
  RecordingCommunicator comm(&rec, g.data());
  RecordingFence fence(&rec);
  GradientBucketer b(kFenceSpans, g.data(), &comm, {.bucket_bytes = 64, .first_bucket_bytes = 64, .fence = &fence});
  const auto& plan = b.buckets();
  ASSERT_EQ(plan.size(), 3u);
  ASSERT_EQ(plan[1].tensors, (std::vector<int>{2, 1}));
  b.BeginStep();
  for (int t = 3; t >= 0; --t) {
    rec.Log("ready " + std::to_string(t));
    b.Ready(t);
  }
  ASSERT_TRUE(b.Finish().ok());
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string bucket = std::to_string(i);
    const int last_ready = rec.Find("ready " + std::to_string(plan[i].tensors.back()));
    const int mark = rec.Find("mark " + bucket), wait = rec.Find("wait " + bucket);
    const int reduce = rec.Find("reduce " + std::to_string(plan[i].begin) + "+" +
                                std::to_string(plan[i].end - plan[i].begin));
    ASSERT_GE(mark, 0) << rec.Dump();
    EXPECT_GT(mark, last_ready) << "bucket " << i << " marked before its last tensor was ready: " << rec.Dump();
    if (plan[i].tensors.size() > 1) {
      // Not marked early, when only its first tensor was ready.
      EXPECT_GT(mark, rec.Find("ready " + std::to_string(plan[i].tensors.front()))) << rec.Dump();
    }
    EXPECT_GT(wait, mark) << rec.Dump();
    EXPECT_GT(reduce, wait) << rec.Dump();
    EXPECT_EQ(rec.ThreadOf("mark " + bucket), std::this_thread::get_id());
    EXPECT_NE(rec.ThreadOf("wait " + bucket), std::this_thread::get_id());
  }
}

TEST(GradientBucketerTest, FenceErrorsFailTheStepWithoutReducingThatBucket) {
  for (bool fail_in_wait : {false, true}) {
    Recorder rec;
    std::vector<float> g(64);
    RecordingCommunicator comm(&rec, g.data());
    RecordingFence fence(&rec, fail_in_wait ? -1 : 1, fail_in_wait ? 1 : -1);
    GradientBucketer b(kFenceSpans, g.data(), &comm,
                       {.bucket_bytes = 64, .first_bucket_bytes = 64, .timeout = std::chrono::seconds(10),
                        .fence = &fence});
    b.BeginStep();
    for (int t = 3; t >= 0; --t) b.Ready(t);
    Status s = b.Finish();
    EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
    EXPECT_NE(s.message().find("gradient bucket 1"), std::string::npos) << s;
    EXPECT_NE(s.message().find(fail_in_wait ? "cudaStreamWaitEvent" : "cudaEventRecord"), std::string::npos) << s;
    EXPECT_EQ(rec.Find("reduce 16+32"), -1) << rec.Dump();  // bucket 1 = tensors 2, 1
  }
}

TEST(GradientBucketerTest, BucketsTravelAsTheWireTypeAsked) {
  for (WireType wire : {WireType::kFp32, WireType::kBf16}) {
    Recorder rec;
    std::vector<float> g(64);
    RecordingCommunicator comm(&rec, g.data());
    GradientBucketer b(kFenceSpans, g.data(), &comm, {.bucket_bytes = 64, .first_bucket_bytes = 64, .wire = wire});
    b.BeginStep();
    for (int t = 3; t >= 0; --t) b.Ready(t);
    ASSERT_TRUE(b.Finish().ok());
    for (const GradientBucket& bucket : b.buckets()) {
      EXPECT_GE(rec.Find(std::string("as ") + WireTypeName(wire) + " " + std::to_string(bucket.begin)), 0)
          << rec.Dump();
    }
  }
}

// An all-reduce that only returns when aborted (as a collective whose peer
// vanished would, until its watchdog fires).
class HangingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  Status AllReduce(float*, size_t, ReduceOp) override {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded, so that a regression fails the test instead of hanging it.
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return aborted_; }))
      return DeadlineExceededError("test communicator: never aborted");
    returned_by_abort_ = true;
    return AbortedError(reason_);
  }
  Status Broadcast(float*, size_t, int) override { return OkStatus(); }
  Status Barrier() override { return OkStatus(); }
  void Abort(const Status& reason) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
      reason_ = reason.message();
    }
    cv_.notify_all();
  }
  bool returned_by_abort() {
    std::lock_guard<std::mutex> lock(mu_);
    return returned_by_abort_;
  }
  std::string reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false, returned_by_abort_ = false;
  std::string reason_;
};

TEST(GradientBucketerTest, AFailedFinishAbortsTheCollectiveInFlight) {
  std::vector<float> g(64);
  HangingCommunicator comm;
  {
    GradientBucketer b({{0, 16}, {16, 16}}, g.data(), &comm,
                       {.bucket_bytes = 64, .first_bucket_bytes = 64, .timeout = std::chrono::milliseconds(100)});
    b.BeginStep();
    b.Ready(1);
    b.Ready(0);
    Status s = b.Finish();
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    // The communicator's own timeout (100 ms) has passed too: the backstop.
    EXPECT_NE(comm.reason().find("did not finish within 200 ms"), std::string::npos) << comm.reason();
  }  // the destructor joins the communication thread
  EXPECT_TRUE(comm.returned_by_abort()) << "the all-reduce in flight was not aborted";
}

}  // namespace
}  // namespace mirrored
