// Where training (re)starts, the same on every replica: from scratch, or
// from the chief's latest complete checkpoint, which global rank 0 restores
// and broadcasts, so no other task needs the run directory. The header
// (step, sampler position, optimizer iterations) travels as host floats;
// the model's weights, statistics and optimizer slots in place, in each
// replica's device memory.
//
//   StartPoint start;
//   MIRRORED_RETURN_IF_ERROR(BroadcastStart(resume, validate_first, global_batch, model, optimizer, replica, &start));
//   data::BatchPrefetcher prefetcher(..., start.position, ...);
#pragma once

#include <cstdint>
#include <optional>

#include "common/run_dir/checkpoint_reader.h"
#include "common/status.h"
#include "worker/data/batch_sampler.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"
#include "worker/strategy/mirrored_strategy.h"

namespace mirrored {

struct StartPoint {
  int64_t step = 0;
  data::SamplerPosition position;
  int64_t iterations = 0;
  // The checkpoint resumed from ends an epoch (or the earlier run) whose
  // validation never made it to metrics.jsonl (the job died in between):
  // run it before training on.
  bool validate_first = false;
  // The checkpoint's fp16 loss scale and its finite-step count (0: none
  // recorded; a fresh start or a run in another precision).
  float loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
};

// A collective: every replica calls it before its first step. On global
// rank 0, `resume` (the chief's checkpoint, or nullopt: a fresh start) is
// restored into `model` and `optimizer`, and `validate_first` is its word on
// StartPoint::validate_first; elsewhere both are ignored. A checkpoint
// written at another global batch resumes its epoch after the same number
// of examples (warned about). Every replica returns with rank 0's weights,
// state and, when resuming, slots and optimizer iterations, and `start`
// filled (left as it is on a fresh start). Errors: restoring the
// checkpoint's, or the collectives'.
Status BroadcastStart(const std::optional<LoadedCheckpoint>& resume, bool validate_first, uint64_t global_batch,
                      model::Model& model, model::Optimizer& optimizer, ReplicaContext& replica, StartPoint* start);

}  // namespace mirrored
