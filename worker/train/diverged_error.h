// The error that stops a diverged training run: the loss over the steps
// since the last sync point, or the weights after a step, are not finite.
// Stopping there keeps the latest checkpoint a good one to resume from; a
// restart would only replay the same steps bit for bit, so it is a
// configuration error (InvalidArgument: exit 2, never retried) and the
// message says what to change.
//
//   if (!std::isfinite(loss_sum)) return DivergedError(mean_loss, first, step, epoch, last_ckpt, chief, options);
//   if (!AllFinite(params)) return DivergedError(std::nullopt, step, step, epoch, last_ckpt, chief, options);
#pragma once

#include <cstdint>
#include <optional>

#include "common/status.h"
#include "worker/train/trainer_options.h"

namespace mirrored {

// `mean_loss`: the mean loss over steps `first`..`last` (all replicas), not
// finite; nullopt: the weights after step `last` are not finite. `epoch`
// counts from 0. `last_checkpoint`: the step of the latest checkpoint
// written or resumed from, -1 for none. `chief`: this task is the chief,
// which knows its checkpoints (the others point to its log).
Status DivergedError(std::optional<float> mean_loss, int64_t first, int64_t last, int64_t epoch,
                     int64_t last_checkpoint, bool chief, const TrainerOptions& options);

// Whether `s` is DivergedError's. Every task reaches that verdict at the
// same step (from all-reduced sums or identical weights), so only the
// chief, which names the checkpoint to resume from, need report it.
bool IsDivergedError(const Status& s);

}  // namespace mirrored
