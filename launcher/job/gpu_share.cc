#include "launcher/job/gpu_share.h"

namespace mirrored {

std::optional<GpuShare> GpuShareOf(const ClusterConfig& config, const EnvironmentMap& env,
                                   const std::vector<std::string>& visible) {
  if (config.is_single_local_task || config.IsEvaluator() || visible.empty()) return std::nullopt;
  if (Lookup(env, "CUDA_VISIBLE_DEVICES")) return std::nullopt;
  const int here = config.cluster.TrainingTasksAtHostOf(config.task);
  const std::optional<int> index = config.cluster.LocalIndexAtHostOf(config.task);
  if (here < 2 || !index) return std::nullopt;
  GpuShare share{.tasks_here = here, .index_here = *index, .gpus_here = static_cast<int>(visible.size())};
  const int per_task = share.gpus_here / here;  // leftover GPUs stay idle, as in a local job
  for (int i = *index * per_task; i < (*index + 1) * per_task; ++i) {
    share.cuda_visible_devices += (share.gpus.empty() ? "" : ",") + visible[static_cast<size_t>(i)];
    share.gpus.push_back(visible[static_cast<size_t>(i)]);
  }
  return share;
}

}  // namespace mirrored
