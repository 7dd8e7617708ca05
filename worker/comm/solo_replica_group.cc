#include "worker/comm/solo_replica_group.h"

#include <stdexcept>
#include <string>

namespace mirrored {

Status SoloCommunicator::Start(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t seq = ++seq_;
  if (started_) started_->fetch_add(1);
  if (!aborted_.ok()) return aborted_.WithContext(what + " #" + std::to_string(seq) + " failed after 0 ms");
  return OkStatus();
}

Status SoloCommunicator::AllReduce(float* data, size_t count, ReduceOp op) {
  const std::string what =
      "all-reduce (" + std::string(ReduceOpName(op)) + ", " + std::to_string(count) + " floats)";
  if (data == nullptr && count > 0) return InvalidArgumentError(what + ": no buffer");
  return Start(what);  // over one rank, SUM, AVG and MAX leave data as it is
}

Status SoloCommunicator::AllReduceAs(WireType /*wire*/, float* data, size_t count, ReduceOp op) {
  return AllReduce(data, count, op);
}

Status SoloCommunicator::Broadcast(float* data, size_t count, int root) {
  const std::string what = "broadcast (root " + std::to_string(root) + ", " + std::to_string(count) + " floats)";
  if (root != 0) return InvalidArgumentError(what + ": the only rank is 0");
  if (data == nullptr && count > 0) return InvalidArgumentError(what + ": no buffer");
  return Start(what);
}

Status SoloCommunicator::Barrier() { return Start("barrier"); }

void SoloCommunicator::Abort(const Status& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.ok()) aborted_ = reason.code() == StatusCode::kAborted ? reason : AbortedError(reason.message());
}

Communicator& SoloReplicaGroup::replica(int local_rank) {
  if (local_rank != 0) throw std::out_of_range("SoloReplicaGroup::replica(" + std::to_string(local_rank) + ")");
  return comm_;
}

}  // namespace mirrored
