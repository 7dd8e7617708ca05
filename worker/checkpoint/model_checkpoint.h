// Between a replica's model + optimizer and checkpoint files: the named
// tensors a checkpoint holds (weights "dense1/kernel", BatchNorm statistics
// "bn1/moving_mean", optimizer slots "dense1/kernel/m", the I64 scalar
// "iterations"), and the way back.
//
//   ModelSnapshot snap = ModelSnapshot::Take(*model, *optimizer);   // host copies
//   MIRRORED_RETURN_IF_ERROR(writer.WriteAsync(snap.Contents(state)));
//   MIRRORED_RETURN_IF_ERROR(RestoreModel(loaded, *model, *optimizer));
#pragma once

#include <cstdint>
#include <vector>

#include "common/run_dir/checkpoint_reader.h"
#include "common/status.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"

namespace mirrored {

class ModelSnapshot {
 public:
  // Copies every buffer of `model` and `optimizer` to the host.
  static ModelSnapshot Take(model::Model& model, model::Optimizer& optimizer);
  // Views into this snapshot (valid while it lives) plus `state`.
  CheckpointContents Contents(const CheckpointState& state) const;
  // Whether every weight, statistic and optimizer slot is finite (no NaN or
  // infinity): a diverged model is never checkpointed.
  bool AllFinite() const;

 private:
  const model::ParameterStore* store_ = nullptr;
  std::vector<std::string> slot_names_;
  std::vector<float> params_, state_;
  std::vector<std::vector<float>> slots_;
  int64_t iterations_ = 0;
};

// Whether every value is finite (no NaN, no infinity): the divergence check
// of the weights (trainer.cc) and of a snapshot before it is written.
bool AllFinite(const std::vector<float>& values);

// Loads `checkpoint`'s tensors into `model` and `optimizer`. Errors:
// DataLoss naming the checkpoint and the tensor that is missing or has
// another shape (e.g. a checkpoint of another model).
Status RestoreModel(const LoadedCheckpoint& checkpoint, model::Model& model, model::Optimizer* optimizer);

}  // namespace mirrored
