#include "worker/train/preempted_tasks.h"

#include <cmath>
#include <cstdint>

namespace mirrored {

std::string PreemptedTasks(const std::vector<std::string>& tasks, float told, float sum_k, float sum_k2, int world) {
  if (told >= static_cast<float>(world)) return tasks.size() == 1 ? "seen by " + tasks[0] : "seen by every task";
  const float k = sum_k / told;
  if (told * sum_k2 == sum_k * sum_k && k == std::floor(k) && k >= 1 && k <= static_cast<float>(tasks.size())) {
    return "first seen by " + tasks[static_cast<size_t>(k) - 1];
  }
  return "first seen by several tasks: " + std::to_string(static_cast<int64_t>(told)) + " of " + std::to_string(world) +
         " replicas";
}

}  // namespace mirrored
