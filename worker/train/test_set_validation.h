// The validation pass: loss and accuracy over the whole test set, sharded
// across every replica (each takes its slice of every global batch, the
// last short one included) and summed exactly. Used by the trainer at each
// epoch's end, and first on resuming a checkpoint whose validation was
// never logged.
//
//   double val_loss = -1, val_acc = -1;
//   MIRRORED_RETURN_IF_ERROR(ValidateOnTestSet(*model, data.test(), global_batch, replica, &val_loss, &val_acc));
#pragma once

#include <cstdint>

#include "common/status.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"
#include "worker/strategy/mirrored_strategy.h"

namespace mirrored {

// A collective: every replica calls it, at the same step. The model runs
// forward only (training=false), so no weight changes. `loss` and
// `accuracy` (the mse under --loss mse: Model::MetricSum) are the means over every example, the same on every replica.
// Errors: the collective's.
Status ValidateOnTestSet(model::Model& model, const data::Dataset& test, uint64_t global_batch,
                         ReplicaContext& replica, double* loss, double* accuracy);

}  // namespace mirrored
