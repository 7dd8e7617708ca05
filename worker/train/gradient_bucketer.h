// Gradient packing for one replica: the gradient buffer is cut into buckets
// of whole tensors in reverse declaration order (the order backward finishes
// them), and each bucket's all-reduce starts, on a communication thread, as
// soon as its last tensor is ready, while backward goes on (PyTorch DDP's
// Reducer; the first bucket is small so communication starts early).
//
//   GradientBucketer b(store.trainable(), store.grads_data(), &comm, {.bucket_bytes = 25 << 20});
//   b.BeginStep();
//   model.Backward(weights, [&](int i) { b.Ready(i); });
//   MIRRORED_RETURN_IF_ERROR(b.Finish());   // every bucket reduced (SUM)
//
// With a 16-bit `wire` only these buckets travel in 16 bits
// (Communicator::AllReduceAs); the gradient buffer stays FP32.
//
// Invariants: every replica builds the same plan from the same model, and
// buckets are reduced in plan order, so the collectives of all replicas
// match. The gradient buffer's alignment padding is zero and stays zero.
//
// Asynchronous devices (GPU): Ready(i) means backward has ISSUED the kernels
// that write tensor i, not that they ran. A GradientFence orders each
// bucket's all-reduce after them: Mark(b) runs on the thread that calls
// Ready(), when bucket b's last tensor is reported (before the communication
// thread may see it), Wait(b) on the communication thread just before the
// bucket's all-reduce. Without a fence (CPU) the gradients are final when
// Ready() is called.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/comm/communicator.h"
#include "worker/comm/wire_type.h"

namespace mirrored {

struct BucketSpan {
  size_t offset = 0;  // in floats, into the gradient buffer
  size_t size = 0;    // floats
};

struct GradientBucket {
  size_t begin = 0, end = 0;   // float range of the gradient buffer
  std::vector<int> tensors;    // tensor indices, in the order they become ready
};

// See the header comment. Errors of Mark/Wait fail the step (Finish()).
class GradientFence {
 public:
  virtual ~GradientFence() = default;
  virtual Status Mark(size_t bucket) = 0;
  virtual Status Wait(size_t bucket) = 0;
};

struct GradientBucketerOptions {
  size_t bucket_bytes = 25u << 20;
  size_t first_bucket_bytes = 1u << 20;
  std::chrono::milliseconds timeout{300000};  // Finish() waits at most this long
  GradientFence* fence = nullptr;             // not owned; null: gradients are final at Ready()
  WireType wire = WireType::kFp32;            // --allreduce-dtype: what the buckets travel as
};

// The bucket plan for tensors at `spans` (declaration order, ascending
// offsets): reverse order, each bucket a contiguous range, closed once it
// reaches its byte budget (a tensor larger than the budget gets a bucket of
// its own).
std::vector<GradientBucket> PlanGradientBuckets(const std::vector<BucketSpan>& spans,
                                                const GradientBucketerOptions& options);

class GradientBucketer {
 public:
  GradientBucketer(std::vector<BucketSpan> spans, float* grads, Communicator* comm,
                   GradientBucketerOptions options);
  ~GradientBucketer();  // stops the communication thread

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // Starts a step: no tensor is ready. The previous step must be Finish()ed.
  void BeginStep();
  // Tensor `index`'s gradient is final, or (with a fence) its kernels are
  // issued (from backward's callback).
  void Ready(int index);
  // Waits for every bucket's all-reduce. Errors: the communicator's
  // (Aborted, DeadlineExceeded naming the collective), FailedPrecondition if
  // some tensor was never reported ready, DeadlineExceeded after `timeout`.
  // Any error also aborts the communicator (the step, and training, have
  // failed): a collective still in flight returns instead of holding the
  // destructor until its own timeout.
  Status Finish();

 private:
  void CommLoop();

  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;     // tensor index -> bucket
  float* grads_;
  Communicator* comm_;
  GradientBucketerOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> pending_;       // per bucket: tensors not yet ready
  size_t next_to_reduce_ = 0;      // comm thread's position in this step
  size_t reduced_ = 0;             // buckets done this step
  bool step_open_ = false;
  bool stop_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace mirrored
