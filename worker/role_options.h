// Each role's options from mirrored-worker's flags, in one place: a chief
// or worker trains with TrainerOptions (and joins with the flags' part of
// StrategyOptions), the evaluator runs with EvaluatorOptions. Seconds
// flags become durations here; neither the trainer nor the evaluator sees
// the flags struct.
//
//   WorkerOptions flags;  ...parsed and validated...
//   StatusOr<TrainSummary> r = Train(TrainerOptionsFrom(flags), strategy, data);
#pragma once

#include "worker/eval/evaluator_options.h"
#include "worker/strategy/strategy_options.h"
#include "worker/train/trainer_options.h"
#include "worker/worker_options.h"

namespace mirrored {

TrainerOptions TrainerOptionsFrom(const WorkerOptions& flags);
EvaluatorOptions EvaluatorOptionsFrom(const WorkerOptions& flags);
// --device (parsed: `device`), --cpu-replicas and the collectives' and
// rendezvous' timeouts into `so`.
void SetStrategyFlags(const WorkerOptions& flags, DeviceKind device, StrategyOptions& so);

}  // namespace mirrored
