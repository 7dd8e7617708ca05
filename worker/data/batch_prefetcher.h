// Background input pipeline for one replica: a thread gathers this
// replica's slice of each global batch into a bounded queue so the training
// loop never waits on input. Stops at `end_epoch` or on Stop(); every wait
// (producer and consumer) has a deadline and watches the shutdown flag.
//
//   BatchPrefetcher p(&ds.train(), sampler, /*replica=*/0, /*replicas=*/1, /*start=*/{0, 0});
//   StatusOr<Batch> b = p.Next(std::chrono::seconds(30));  // OutOfRange at the end
//   SamplerPosition resume_at = b->next;                    // what a checkpoint stores
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/data/batch_sampler.h"
#include "worker/data/dataset.h"

namespace mirrored::data {

// One replica's share of one global batch.
struct Batch {
  SamplerPosition position;       // the global batch this slice belongs to
  SamplerPosition next;           // the position after it (resume point)
  uint64_t global_size = 0;       // examples in the whole global batch
  uint32_t size = 0;              // examples in this replica's slice (may be 0)
  std::vector<float> images;      // size * example_size floats, NHWC
  std::vector<int32_t> labels;    // size labels
  std::vector<float> targets;     // regression data: size x target width floats (else empty)
};

class BatchPrefetcher {
 public:
  static constexpr uint64_t kForever = std::numeric_limits<uint64_t>::max();

  // `dataset` must outlive the prefetcher. Produces positions from `start`
  // until the first position of `end_epoch` (exclusive).
  BatchPrefetcher(const Dataset* dataset, BatchSampler sampler, uint32_t replica, uint32_t replicas,
                  SamplerPosition start, uint64_t end_epoch = kForever, size_t queue_depth = 4);
  ~BatchPrefetcher();  // Stop() and join.

  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next batch in order. Errors: OutOfRange once end_epoch is reached,
  // DeadlineExceeded when nothing arrived within `timeout` (the message says
  // which replica and position it waited for), Cancelled after Stop().
  StatusOr<Batch> Next(std::chrono::milliseconds timeout);

  // Asks the producer to finish; idempotent, returns promptly.
  void Stop();

 private:
  void Produce();

  const Dataset* dataset_;
  BatchSampler sampler_;
  uint32_t replica_;
  uint32_t replicas_;
  uint64_t end_epoch_;
  size_t queue_depth_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;          // guarded by mu_
  bool finished_ = false;            // producer reached end_epoch; guarded by mu_
  SamplerPosition waiting_for_;      // next position the consumer expects; guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
  SamplerPosition start_;
};

}  // namespace mirrored::data
