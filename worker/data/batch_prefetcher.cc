#include "worker/data/batch_prefetcher.h"

#include <algorithm>

namespace mirrored::data {
namespace {
// The producer re-checks the shutdown flag at least this often while the
// queue is full, so Stop() never waits on a consumer that went away.
constexpr auto kProducerPoll = std::chrono::milliseconds(50);
}  // namespace

BatchPrefetcher::BatchPrefetcher(const Dataset* dataset, BatchSampler sampler, uint32_t replica, uint32_t replicas,
                                 SamplerPosition start, uint64_t end_epoch, size_t queue_depth)
    : dataset_(dataset), sampler_(std::move(sampler)), replica_(replica), replicas_(std::max<uint32_t>(replicas, 1)),
      end_epoch_(end_epoch), queue_depth_(std::max<size_t>(queue_depth, 1)), waiting_for_(start), start_(start) {
  thread_ = std::thread([this] { Produce(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void BatchPrefetcher::Stop() {
  stop_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void BatchPrefetcher::Produce() {
  SamplerPosition pos = start_;
  uint64_t order_epoch = std::numeric_limits<uint64_t>::max();
  std::vector<uint32_t> order;
  const size_t es = dataset_->example_size();
  while (!stop_.load() && pos.epoch < end_epoch_ && sampler_.steps_per_epoch() > 0) {
    if (order_epoch != pos.epoch) {
      order = sampler_.EpochOrder(pos.epoch);
      order_epoch = pos.epoch;
    }
    Batch b;
    b.position = pos;
    b.next = sampler_.Advance(pos);
    std::vector<uint32_t> idx = sampler_.ReplicaIndicesFromOrder(order, pos, replica_, replicas_);
    uint64_t gbegin = std::min<uint64_t>(pos.step * sampler_.global_batch(), order.size());
    b.global_size = std::min<uint64_t>(sampler_.global_batch(), order.size() - gbegin);
    b.size = static_cast<uint32_t>(idx.size());
    b.images.resize(idx.size() * es);
    b.labels.resize(idx.size());
    dataset_->Gather(idx, b.images.data(), b.labels.data());
    if (dataset_->has_targets()) {
      b.targets.resize(idx.size() * size_t(dataset_->target_width()));
      dataset_->GatherTargets(idx, b.targets.data());
    }

    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_.load() && queue_.size() >= queue_depth_) cv_.wait_for(lock, kProducerPoll);
    if (stop_.load()) break;
    queue_.push_back(std::move(b));
    cv_.notify_all();
    pos = queue_.back().next;
  }
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  cv_.notify_all();
}

StatusOr<Batch> BatchPrefetcher::Next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  while (queue_.empty()) {
    if (stop_.load()) return CancelledError("input pipeline of replica " + std::to_string(replica_) + " was stopped");
    if (finished_ && sampler_.steps_per_epoch() == 0) {
      return InvalidArgumentError("global batch of " + std::to_string(sampler_.global_batch()) +
                                  " examples is larger than the dataset (" + std::to_string(sampler_.num_examples()) +
                                  " examples); lower --batch-per-replica or the replica count");
    }
    if (finished_) {
      return OutOfRangeError("input pipeline of replica " + std::to_string(replica_) + " reached the end of epoch " +
                             std::to_string(end_epoch_ == 0 ? 0 : end_epoch_ - 1));
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && queue_.empty() && !finished_) {
      return DeadlineExceededError("replica " + std::to_string(replica_) + " waited " +
                                   std::to_string(timeout.count()) + " ms for input batch (epoch " +
                                   std::to_string(waiting_for_.epoch) + ", step " +
                                   std::to_string(waiting_for_.step) + "); the input thread is stalled");
    }
  }
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  waiting_for_ = b.next;
  cv_.notify_all();
  return b;
}

}  // namespace mirrored::data
