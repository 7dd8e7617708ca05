// The GPUs of one host split among the training tasks a cluster lists there,
// as `mirrored-launch local` splits them among its workers and as the cores
// are split: a task started by `mirrored-launch cluster` on a host that runs
// several would otherwise open replicas on every GPU of the host, and NCCL
// refuses two ranks on one GPU ("Duplicate GPU detected"). Only when
// CUDA_VISIBLE_DEVICES is not set: a value set by the user or by Slurm's GPU
// binding (--gpus-per-task) is theirs to keep.
//
//   std::optional<GpuShare> share = GpuShareOf(config, env, VisibleGpus(env_list));
//   if (share) t.env.push_back("CUDA_VISIBLE_DEVICES=" + share->cuda_visible_devices);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster/cluster_config.h"
#include "common/cluster/environment_map.h"

namespace mirrored {

struct GpuShare {
  int tasks_here = 1;                // training tasks listed at this host
  int index_here = 0;                // this task's place among them
  int gpus_here = 0;                 // GPUs visible at this host
  std::vector<std::string> gpus{};   // this task's (empty: more tasks than GPUs, it trains on CPUs)
  std::string cuda_visible_devices{};  // gpus, comma-joined
};

// nullopt: nothing to set (one training task here, an evaluator, a single
// local task, no GPU visible, or CUDA_VISIBLE_DEVICES already set).
// `visible`: the host's GPUs (VisibleGpus), in CUDA's numbering.
std::optional<GpuShare> GpuShareOf(const ClusterConfig& config, const EnvironmentMap& env,
                                   const std::vector<std::string>& visible);

}  // namespace mirrored
