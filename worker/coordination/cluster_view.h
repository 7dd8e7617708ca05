// ClusterView: what every task learns at rendezvous — world size, each
// task's replica count and global rank offset, and the NCCL unique id.
//
//   StatusOr<ClusterView> v = BuildClusterView({"chief:0", "worker:0"}, {2, 2}, id, gen);
//   int64_t my_first_rank = v->tasks[my_index].rank_offset;   // 0 or 2
//   int64_t world = v->world_size;                              // 4
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored::coordination {

struct TaskInfo {
  std::string name;
  int device_count = 0;
  int64_t rank_offset = 0;  // global rank of the task's first replica
  friend bool operator==(const TaskInfo&, const TaskInfo&) = default;
};

// Invariant: tasks are in rank order; rank_offset[i] = sum of device_count[<i];
// world_size = sum of all device counts; nccl_unique_id has 128 bytes.
struct ClusterView {
  uint64_t generation = 0;
  int64_t world_size = 0;
  std::vector<TaskInfo> tasks;
  std::string nccl_unique_id;
  bool device_counts_match = true;  // false: tasks have different replica counts

  // Index of `task` in `tasks`, or -1.
  int IndexOf(const std::string& task) const;
  // "generation 7: 4 replicas; chief:0 x2 @0, worker:0 x2 @2". Past
  // kDebugStringTasks tasks, the first ones and a count of the rest: every
  // task logs it once, and 16,384 tasks would make each line 400 KB.
  static constexpr size_t kDebugStringTasks = 64;
  std::string DebugString() const;
  friend bool operator==(const ClusterView&, const ClusterView&) = default;
};

// Ranks in the given task order, then local device order.
// Errors: InvalidArgument when the sizes differ, a count is < 1, or the id
// is not 128 bytes.
StatusOr<ClusterView> BuildClusterView(const std::vector<std::string>& tasks,
                                       const std::vector<int>& device_counts,
                                       std::string nccl_unique_id, uint64_t generation);

}  // namespace mirrored::coordination
