#include "worker/coordination/cluster_view.h"

#include <algorithm>
#include <sstream>

namespace mirrored::coordination {

int ClusterView::IndexOf(const std::string& task) const {
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].name == task) return static_cast<int>(i);
  }
  return -1;
}

std::string ClusterView::DebugString() const {
  std::ostringstream os;
  os << "generation " << generation << ": " << world_size << (world_size == 1 ? " replica;" : " replicas;");
  const size_t listed = std::min(tasks.size(), kDebugStringTasks);
  for (size_t i = 0; i < listed; ++i) {
    os << (i ? ", " : " ") << tasks[i].name << " x" << tasks[i].device_count << " @"
       << tasks[i].rank_offset;
  }
  if (listed < tasks.size()) os << ", ... (" << tasks.size() - listed << " more tasks)";
  if (!device_counts_match) os << " (device counts differ between tasks)";
  return os.str();
}

StatusOr<ClusterView> BuildClusterView(const std::vector<std::string>& tasks,
                                       const std::vector<int>& device_counts,
                                       std::string nccl_unique_id, uint64_t generation) {
  if (tasks.size() != device_counts.size() || tasks.empty()) {
    return InvalidArgumentError("cluster view: " + std::to_string(tasks.size()) + " tasks but " +
                                std::to_string(device_counts.size()) + " device counts");
  }
  if (nccl_unique_id.size() != 128) {
    return InvalidArgumentError("cluster view: NCCL unique id has " +
                                std::to_string(nccl_unique_id.size()) + " bytes, expected 128");
  }
  ClusterView view;
  view.generation = generation;
  view.nccl_unique_id = std::move(nccl_unique_id);
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (device_counts[i] < 1) {
      return InvalidArgumentError("cluster view: task " + tasks[i] + " reported " +
                                  std::to_string(device_counts[i]) +
                                  " local devices; every task needs at least 1");
    }
    view.tasks.push_back({tasks[i], device_counts[i], view.world_size});
    view.world_size += device_counts[i];
    if (device_counts[i] != device_counts[0]) view.device_counts_match = false;
  }
  return view;
}

}  // namespace mirrored::coordination
