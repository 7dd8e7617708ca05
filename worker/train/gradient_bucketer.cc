#include "worker/train/gradient_bucketer.h"

#include <algorithm>

namespace mirrored {

std::vector<GradientBucket> PlanGradientBuckets(const std::vector<BucketSpan>& spans,
                                                const GradientBucketerOptions& options) {
  std::vector<GradientBucket> buckets;
  GradientBucket current;
  size_t budget = options.first_bucket_bytes;
  size_t bytes = 0;
  for (int i = static_cast<int>(spans.size()) - 1; i >= 0; --i) {
    const BucketSpan& s = spans[static_cast<size_t>(i)];
    if (current.tensors.empty()) {
      current.end = s.offset + s.size;
    }
    current.begin = s.offset;
    current.tensors.push_back(i);
    bytes += s.size * sizeof(float);
    if (bytes >= budget) {
      buckets.push_back(std::move(current));
      current = GradientBucket{};
      bytes = 0;
      budget = options.bucket_bytes;
    }
  }
  if (!current.tensors.empty()) buckets.push_back(std::move(current));
  // Extend each bucket's range over the padding before the next tensor, so
  // that the buckets tile the buffer and padding is reduced (as zeros).
  for (size_t b = 1; b < buckets.size(); ++b) buckets[b].end = buckets[b - 1].begin;
  return buckets;
}

GradientBucketer::GradientBucketer(std::vector<BucketSpan> spans, float* grads, Communicator* comm,
                                   GradientBucketerOptions options)
    : buckets_(PlanGradientBuckets(spans, options)),
      bucket_of_(spans.size(), -1),
      grads_(grads),
      comm_(comm),
      options_(options),
      pending_(buckets_.size(), 0) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int t : buckets_[b].tensors) bucket_of_[static_cast<size_t>(t)] = static_cast<int>(b);
  thread_ = std::thread([this] { CommLoop(); });
}

GradientBucketer::~GradientBucketer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradientBucketer::BeginStep() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = static_cast<int>(buckets_[b].tensors.size());
  next_to_reduce_ = 0;
  reduced_ = 0;
  step_open_ = true;
}

void GradientBucketer::Ready(int index) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t b = static_cast<size_t>(bucket_of_.at(static_cast<size_t>(index)));
    if (pending_[b] == 1 && options_.fence != nullptr) {
      // Marked before the count reaches zero (under the lock): the
      // communication thread cannot Wait on a mark not yet made.
      Status s = options_.fence->Mark(b);
      if (!s.ok() && error_.ok()) error_ = s.WithContext("gradient bucket " + std::to_string(b));
    }
    wake = --pending_[b] == 0;
  }
  if (wake) cv_.notify_all();
}

void GradientBucketer::CommLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Idle between steps: woken by Ready() or the destructor.
    cv_.wait(lock, [&] {
      return stop_ || (step_open_ && next_to_reduce_ < buckets_.size() && pending_[next_to_reduce_] == 0 &&
                       error_.ok());
    });
    if (stop_) return;
    const size_t index = next_to_reduce_;
    const GradientBucket& b = buckets_[index];
    lock.unlock();
    Status s = options_.fence != nullptr ? options_.fence->Wait(index) : OkStatus();
    if (!s.ok()) s = s.WithContext("gradient bucket " + std::to_string(index));
    if (s.ok()) s = comm_->AllReduceAs(options_.wire, grads_ + b.begin, b.end - b.begin, ReduceOp::kSum);
    lock.lock();
    if (!s.ok() && error_.ok()) error_ = s;
    ++next_to_reduce_;
    ++reduced_;
    cv_.notify_all();
  }
}

Status GradientBucketer::Finish() {
  Status status = [&] {
    std::unique_lock<std::mutex> lock(mu_);
    // A backstop: the bucket's own all-reduce has the same timeout from an
    // earlier start, and its error says which collective and, past it, which
    // tasks never started it. Only a communicator that does not return at
    // all meets this one.
    const auto backstop = options_.timeout + std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(5));
    const auto deadline = std::chrono::steady_clock::now() + backstop;
    bool done = cv_.wait_until(lock, deadline, [&] { return reduced_ == buckets_.size() || !error_.ok(); });
    step_open_ = false;
    if (!error_.ok()) return error_;
    if (!done) {
      for (size_t b = 0; b < buckets_.size(); ++b) {
        if (pending_[b] > 0) {
          return FailedPreconditionError("gradient bucket " + std::to_string(b) + " still waits for " +
                                         std::to_string(pending_[b]) +
                                         " tensor(s): backward did not report them");
        }
      }
      return DeadlineExceededError("gradient all-reduce did not finish within " + std::to_string(backstop.count()) +
                                   " ms (its communicator neither completed nor failed it)");
    }
    return OkStatus();
  }();
  // A failed step ends training: abort the communicator, so that an
  // all-reduce still in flight on the communication thread returns now and
  // the destructor's join does not wait out that collective's own timeout.
  if (!status.ok()) comm_->Abort(status);
  return status;
}

}  // namespace mirrored
