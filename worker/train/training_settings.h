// The settings every training task must agree on, as (name, value) pairs
// for MirroredStrategy::CheckTasksAgree: whatever decides the collectives'
// sizes and the steps they run at (tensor shapes, buckets, steps per epoch,
// sync points, validation), and what makes the replicas' updates the same.
// A task started with another model, batch or schedule would send
// collectives of other sizes at other steps: the job refuses it (exit 2)
// before the first one.
//
//   MIRRORED_RETURN_IF_ERROR(strategy.CheckTasksAgree(
//       TrainingSettings(options, data.train().size(), data.test().size())));
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "worker/train/trainer_options.h"

namespace mirrored {

// Named as the user knows them: the flag ("--lr", with the learning rate it
// takes effect as), or what --data gave ("training examples (--data)").
// `test_examples` is compared only with --validate.
std::vector<std::pair<std::string, std::string>> TrainingSettings(const TrainerOptions& options,
                                                                  size_t training_examples, size_t test_examples);

}  // namespace mirrored
