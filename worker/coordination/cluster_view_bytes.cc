#include "worker/coordination/cluster_view_bytes.h"

#include <vector>

#include "proto/coordination.pb.h"

namespace mirrored::coordination {

std::string SerializeClusterView(const ClusterView& view) {
  rpc::ClusterView proto;
  proto.set_generation(view.generation);
  proto.set_world_size(view.world_size);
  proto.set_nccl_unique_id(view.nccl_unique_id);
  proto.set_device_counts_match(view.device_counts_match);
  proto.mutable_tasks()->Reserve(static_cast<int>(view.tasks.size()));
  for (const TaskInfo& t : view.tasks) {
    rpc::TaskInfo* info = proto.add_tasks();
    info->set_name(t.name);
    info->set_device_count(t.device_count);
    info->set_rank_offset(t.rank_offset);
  }
  return proto.SerializeAsString();
}

StatusOr<ClusterView> ParseClusterView(const std::string& bytes) {
  rpc::ClusterView proto;
  if (!proto.ParseFromString(bytes)) {
    return InvalidArgumentError("the coordination service's cluster view (" + std::to_string(bytes.size()) +
                                " bytes) does not parse as a ClusterView message");
  }
  std::vector<std::string> names;
  std::vector<int> counts;
  names.reserve(proto.tasks_size());
  counts.reserve(proto.tasks_size());
  for (const rpc::TaskInfo& t : proto.tasks()) {
    names.push_back(t.name());
    counts.push_back(t.device_count());
  }
  return BuildClusterView(names, counts, proto.nccl_unique_id(), proto.generation());
}

std::shared_ptr<const std::string> ClusterViewBytesCache::Get(const std::shared_ptr<const ClusterView>& view) {
  std::lock_guard<std::mutex> lock(mu_);
  if (view != view_) {
    bytes_ = std::make_shared<const std::string>(SerializeClusterView(*view));
    view_ = view;
  }
  return bytes_;
}

}  // namespace mirrored::coordination
