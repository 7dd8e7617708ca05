#include "worker/comm/hierarchical_process_group.h"

#include <algorithm>

namespace mirrored {

HostLayout HostLayout::FromHostKeys(const std::vector<std::string>& keys) {
  HostLayout layout;
  std::vector<std::string> hosts;
  for (size_t rank = 0; rank < keys.size(); ++rank) {
    auto it = std::find(hosts.begin(), hosts.end(), keys[rank]);
    const int host = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) {
      hosts.push_back(keys[rank]);
      layout.leader_of_host.push_back(static_cast<int>(rank));
      layout.size_of_host.push_back(0);
    }
    layout.host_of.push_back(host);
    layout.local_rank_of.push_back(layout.size_of_host[host]++);
  }
  return layout;
}

HierarchicalProcessGroup::HierarchicalProcessGroup(int rank, HostLayout layout, std::unique_ptr<ProcessGroup> local,
                                                   std::unique_ptr<ProcessGroup> leaders)
    : rank_(rank), layout_(std::move(layout)), local_(std::move(local)), leaders_(std::move(leaders)) {}

Status HierarchicalProcessGroup::AllReduce(float* data, size_t count, ReduceOp op) {
  return AllReduceAs(WireType::kFp32, data, count, op);
}

Status HierarchicalProcessGroup::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  MIRRORED_RETURN_IF_ERROR(local_->AllReduceAs(wire, data, count, op));
  if (leader()) MIRRORED_RETURN_IF_ERROR(leaders_->AllReduceAs(wire, data, count, op));
  return local_->Broadcast(data, count, /*root_process=*/0);
}

Status HierarchicalProcessGroup::Broadcast(float* data, size_t count, int root_process) {
  if (root_process < 0 || root_process >= size()) {
    return InvalidArgumentError("broadcast root " + std::to_string(root_process) + " is out of range for " +
                                std::to_string(size()) + " processes");
  }
  const int root_host = layout_.host_of[root_process];
  const bool root_here = layout_.host_of[rank_] == root_host;
  // The root's host hands its data to its leader, the leaders pass it on,
  // every other host takes it from its leader.
  if (root_here) MIRRORED_RETURN_IF_ERROR(local_->Broadcast(data, count, layout_.local_rank_of[root_process]));
  if (leader()) MIRRORED_RETURN_IF_ERROR(leaders_->Broadcast(data, count, root_host));
  if (!root_here) MIRRORED_RETURN_IF_ERROR(local_->Broadcast(data, count, 0));
  return OkStatus();
}

Status HierarchicalProcessGroup::Barrier() {
  MIRRORED_RETURN_IF_ERROR(local_->Barrier());
  if (leader()) MIRRORED_RETURN_IF_ERROR(leaders_->Barrier());
  return local_->Barrier();
}

void HierarchicalProcessGroup::Abort() {
  local_->Abort();
  if (leaders_ != nullptr) leaders_->Abort();
}

}  // namespace mirrored
