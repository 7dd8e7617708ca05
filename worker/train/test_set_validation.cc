#include "worker/train/test_set_validation.h"

#include <algorithm>
#include <vector>

#include "worker/data/batch_sampler.h"

namespace mirrored {

Status ValidateOnTestSet(model::Model& model, const data::Dataset& test, uint64_t global_batch,
                         ReplicaContext& replica, double* loss, double* accuracy) {
  data::BatchSampler sampler(test.size(), global_batch, 0, /*drop_remainder=*/false, /*shuffle=*/false);
  const auto order = sampler.EpochOrder(0);
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<float> targets;
  double loss_sum = 0, correct = 0, count = 0;
  for (uint64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
    auto idx = sampler.ReplicaIndicesFromOrder(order, {0, step}, static_cast<uint32_t>(replica.global_rank()),
                                               static_cast<uint32_t>(replica.num_replicas_in_sync()));
    if (idx.empty()) continue;
    images.resize(idx.size() * test.example_size());
    labels.resize(idx.size());
    test.Gather(idx, images.data(), labels.data());
    if (test.has_targets()) {
      targets.resize(idx.size() * size_t(test.target_width()));
      test.GatherTargets(idx, targets.data());
    }
    model.Forward(static_cast<int>(idx.size()), images.data(), labels.data(),
                  test.has_targets() ? targets.data() : nullptr, /*training=*/false);
    for (float l : model.losses()) loss_sum += l;
    correct += model.MetricSum();
    count += static_cast<double>(idx.size());
  }
  std::vector<float> sums = {static_cast<float>(loss_sum), static_cast<float>(correct), static_cast<float>(count)};
  MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(sums));
  *loss = sums[0] / std::max(1.0f, sums[2]);
  *accuracy = sums[1] / std::max(1.0f, sums[2]);
  return OkStatus();
}

}  // namespace mirrored
