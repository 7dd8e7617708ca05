// The built-in training loop of mirrored-worker: the tutorials' custom
// training loop (../shared/seeds) on a MirroredStrategy. Each replica trains
// its own model copy on its slice of every global batch; per-example losses
// are scaled by 1 / GLOBAL batch size and gradients all-reduced with SUM in
// buckets overlapped with backward, so the update equals the one-device
// update on the global batch. Global rank 0 logs progress, metrics.jsonl and
// TensorBoard scalars.
//
//   MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(config, so));
//   StatusOr<TrainSummary> r = Train(options, *strategy);
//
// The last partial global batch of an epoch is dropped (every step then has a
// full slice on every replica, so no replica waits on an empty one); the
// validation pass keeps it (short slices, counts reduced exactly).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "worker/data/fashion_mnist.h"
#include "worker/train/mirrored_strategy.h"
#include "worker/worker_options.h"

namespace mirrored {

struct TrainSummary {
  int64_t steps = 0;            // global steps completed
  double loss = 0;              // mean training loss over the last epoch
  double accuracy = 0;
  double val_loss = -1;         // last validation (-1: none)
  double val_accuracy = -1;
  double samples_per_sec = 0;
  std::vector<float> params;    // this task's first replica's final parameters (host copy)
  uint32_t weights_fingerprint = 0;  // 24-bit hash of those parameters' bits
  bool replicas_identical = true;  // every replica's weights hash equal at the end
  bool preempted = false;       // stopped early on SIGTERM (checkpointed when there is a run directory)
  std::string preempted_tasks;  // who had the SIGTERM by the agreed step: "first seen by worker:1", "seen by every task"
  bool nothing_to_train = false;  // resumed at or past the last step --epochs / --max-steps allow
};

// Trains on `data` (options.data_dir loaded by the caller, e.g. while the
// strategy was forming, with the test split when options.validate).
StatusOr<TrainSummary> Train(const WorkerOptions& options, MirroredStrategy& strategy,
                             const data::FashionMnist& data);
// Loads options.data_dir, then trains.
StatusOr<TrainSummary> Train(const WorkerOptions& options, MirroredStrategy& strategy);

}  // namespace mirrored
