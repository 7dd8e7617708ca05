#include "worker/comm/cpu_replica_group.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

#include "worker/comm/half_conversion.h"

namespace mirrored {
namespace {

// Local replicas wait this much longer than replica 0's cross-process
// operation may take, so that its own timeout is the error that surfaces.
constexpr std::chrono::seconds kCrossProcessGrace{1};

// dst (op)= src as the wire holds it: each contribution rounded (a maximum
// of rounded values is the rounded maximum: rounding is monotonic).
void Accumulate(WireType wire, ReduceOp op, float* dst, const float* src, size_t n) {
  if (wire == WireType::kFp32 || op == ReduceOp::kMax) {
    ReduceInto(dst, src, n, op);
  } else {
    AddRoundedToWire(wire, dst, src, n);
  }
}

// kAvg's division of the (rounded) sum, itself rounded again.
void Average(WireType wire, float* data, size_t n, float scale) {
  Scale(data, n, scale);
  RoundToWire(wire, data, n);
}

}  // namespace

class CpuReplicaGroup::ReplicaCommunicator : public Communicator {
 public:
  ReplicaCommunicator(CpuReplicaGroup* group, int local_rank) : group_(group), local_rank_(local_rank) {}
  int rank() const override { return group_->rank_offset_ + local_rank_; }
  int world_size() const override { return group_->world_size_; }
  Status AllReduce(float* data, size_t count, ReduceOp op) override {
    return AllReduceAs(WireType::kFp32, data, count, op);
  }
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override {
    return group_->Run(local_rank_, {Kind::kAllReduce, data, count, op, 0, 0, wire});
  }
  Status Broadcast(float* data, size_t count, int root) override {
    if (root < 0 || root >= group_->world_size_) {
      return InvalidArgumentError("broadcast root " + std::to_string(root) +
                                  " is out of range: world size " + std::to_string(group_->world_size_));
    }
    return group_->Run(local_rank_, {Kind::kBroadcast, data, count, ReduceOp::kSum, root, 0, WireType::kFp32});
  }
  Status Barrier() override { return group_->Run(local_rank_, {Kind::kBarrier, nullptr, 0, ReduceOp::kSum, 0, 0, WireType::kFp32}); }
  void Abort(const Status& reason) override { group_->Abort(reason); }

 private:
  CpuReplicaGroup* group_;
  int local_rank_;
};

CpuReplicaGroup::CpuReplicaGroup(CpuReplicaGroupOptions options, ProcessGroup* cross)
    : options_(std::move(options)),
      cross_(cross),
      local_size_(options_.replicas_per_process.at(options_.process_rank)),
      rank_offset_(std::accumulate(options_.replicas_per_process.begin(),
                                   options_.replicas_per_process.begin() + options_.process_rank, 0)),
      world_size_(std::accumulate(options_.replicas_per_process.begin(),
                                  options_.replicas_per_process.end(), 0)),
      barrier_(local_size_),
      posts_(local_size_),
      seq_(local_size_, 0) {
  for (int r = 0; r < local_size_; ++r) communicators_.push_back(std::make_unique<ReplicaCommunicator>(this, r));
}

CpuReplicaGroup::~CpuReplicaGroup() = default;

Communicator& CpuReplicaGroup::replica(int local_rank) { return *communicators_.at(local_rank); }

void CpuReplicaGroup::Abort(const Status& reason) {
  barrier_.Abort(reason.code() == StatusCode::kAborted ? reason : AbortedError(reason.message()));
  // The leader may be inside a cross-process collective that no local
  // barrier can interrupt.
  if (cross_ != nullptr) cross_->Abort();
}

Status CpuReplicaGroup::Describe(const Status& s, const Post& post,
                                 std::chrono::steady_clock::time_point start) const {
  static constexpr const char* kNames[] = {"all-reduce", "broadcast", "barrier"};
  std::ostringstream what;
  what << kNames[static_cast<int>(post.kind)] << " #" << post.seq;
  if (post.kind == Kind::kAllReduce) {
    what << " (" << ReduceOpName(post.op) << ", " << post.count << " floats";
    if (post.wire != WireType::kFp32) what << " as " << WireTypeName(post.wire);
    what << ")";
  }
  if (post.kind == Kind::kBroadcast) what << " (root " << post.root << ", " << post.count << " floats)";
  what << " failed after "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
       << " ms";
  return s.WithContext(what.str());
}

Status CpuReplicaGroup::Run(int local_rank, Post post) {
  post.seq = ++seq_[local_rank];
  if (local_rank == 0 && options_.collectives_started) options_.collectives_started->fetch_add(1);
  const auto start = std::chrono::steady_clock::now();
  Status s = RunCollective(local_rank, post, start + options_.timeout);
  if (!s.ok()) {
    // Whatever broke this replica breaks the group: the others must not wait
    // for a partner that has left.
    barrier_.Abort(s);
    return Describe(s, post, start);
  }
  return s;
}

Status CpuReplicaGroup::CheckPostsMatch() const {
  const Post& lead = posts_[0];
  for (int j = 1; j < local_size_; ++j) {
    const Post& other = posts_[j];
    if (other.kind != lead.kind || other.count != lead.count || other.op != lead.op ||
        other.root != lead.root || other.seq != lead.seq || other.wire != lead.wire) {
      return InternalError("local replicas 0 and " + std::to_string(j) +
                           " called different collectives at the same point (count " +
                           std::to_string(lead.count) + " vs " + std::to_string(other.count) +
                           "): every replica must issue the same operations in the same order");
    }
  }
  return OkStatus();
}

Status CpuReplicaGroup::RunCrossProcess(const Post& post, float* result) {
  if (cross_ == nullptr || cross_->size() <= 1) return OkStatus();
  if (post.kind == Kind::kAllReduce) return cross_->AllReduceAs(post.wire, result, post.count, post.op);
  if (post.kind == Kind::kBroadcast) {
    int root_process = 0;
    for (int r = post.root; r >= options_.replicas_per_process[root_process];) {
      r -= options_.replicas_per_process[root_process++];
    }
    return cross_->Broadcast(result, post.count, root_process);
  }
  return cross_->Barrier();
}

Status CpuReplicaGroup::RunCollective(int lr, const Post& post, PhaseBarrier::Clock::time_point deadline) {
  posts_[lr] = post;
  MIRRORED_RETURN_IF_ERROR(barrier_.Arrive(lr, deadline));  // B1
  MIRRORED_RETURN_IF_ERROR(CheckPostsMatch());
  const size_t n = post.count;
  const size_t begin = n * lr / local_size_;
  const size_t end = n * (lr + 1) / local_size_;
  float* result = posts_[0].data;

  const bool single_process = (cross_ == nullptr || cross_->size() == 1);
  if (post.kind == Kind::kAllReduce && single_process) {
    // Fused: replica i reduces slice i of every buffer in an L1-sized block
    // and writes the result straight into every buffer (one read and one
    // write per buffer element, two barriers). Same summation order for all
    // elements, so every replica ends bit-identical.
    constexpr size_t kBlock = 2048;
    float block[kBlock];
    const float scale = post.op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world_size_) : 1.0f;
    for (size_t b = begin; b < end; b += kBlock) {
      const size_t len = std::min(kBlock, end - b);
      std::memcpy(block, posts_[0].data + b, len * sizeof(float));
      RoundToWire(post.wire, block, len);  // no-op for FP32
      for (int j = 1; j < local_size_; ++j) Accumulate(post.wire, post.op, block, posts_[j].data + b, len);
      RoundToWire(post.wire, block, len);
      if (post.op == ReduceOp::kAvg) Average(post.wire, block, len, scale);
      for (int j = 0; j < local_size_; ++j) std::memcpy(posts_[j].data + b, block, len * sizeof(float));
    }
    return barrier_.Arrive(lr, deadline);  // B2: nobody returns while others write its buffer
  }
  if (post.kind == Kind::kAllReduce) {
    RoundToWire(post.wire, result + begin, end - begin);
    for (int j = 1; j < local_size_; ++j) {
      Accumulate(post.wire, post.op, result + begin, posts_[j].data + begin, end - begin);
    }
  } else if (post.kind == Kind::kBroadcast) {
    // The root's buffer travels through replica 0's (when the root is local).
    const int root_local = post.root - rank_offset_;
    if (root_local > 0 && root_local < local_size_) {
      std::memcpy(result + begin, posts_[root_local].data + begin, (end - begin) * sizeof(float));
    }
  }
  MIRRORED_RETURN_IF_ERROR(barrier_.Arrive(lr, deadline));  // B2

  // B3 waits for replica 0's cross-process operation, which has a timeout
  // of its own from its start (now): the others wait that long and a second
  // more, so the error that surfaces is that operation's, not "waited for
  // local replica 0".
  const auto cross_deadline =
      std::max(deadline, PhaseBarrier::Clock::now() + options_.timeout + kCrossProcessGrace);
  if (lr == 0) cross_status_ = RunCrossProcess(post, result);
  MIRRORED_RETURN_IF_ERROR(barrier_.Arrive(lr, cross_deadline));  // B3
  if (!cross_status_.ok()) return cross_status_;
  // The cross-process operation may have succeeded past the local deadline:
  // what is left is local work, given its own time.
  deadline = std::max(deadline, PhaseBarrier::Clock::now() + options_.timeout);
  if (post.kind == Kind::kBarrier) return OkStatus();

  if (post.kind == Kind::kAllReduce && post.op == ReduceOp::kAvg) {
    Average(post.wire, result + begin, end - begin, 1.0f / static_cast<float>(world_size_));
    MIRRORED_RETURN_IF_ERROR(barrier_.Arrive(lr, deadline));  // B3'
  }
  if (lr != 0) std::memcpy(post.data, result, n * sizeof(float));
  return barrier_.Arrive(lr, deadline);  // B4
}

}  // namespace mirrored
