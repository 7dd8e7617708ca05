// The learning rate of each optimizer step: a pure function of the global
// step (the updates done before it), so a job resumed from a checkpoint
// continues the schedule exactly. Warm-up rises linearly from 0 to the
// peak; the decay then counts its steps from the warm-up's end. Each decay
// is the closed form of a Keras schedule (tf.keras.optimizers.schedules),
// which the PyTorch scheduler named beside it also follows when stepped
// once per optimizer step:
//
//   constant     peak                                        (a float lr)
//   cosine       peak * ((1 - alpha) * (1 + cos(pi * min(t, D) / D)) / 2 + alpha)
//                CosineDecay(decay_steps=D, alpha, warmup_target=peak,
//                warmup_steps=W, initial_learning_rate=0); CosineAnnealingLR
//                (T_max=D, eta_min=alpha*peak) up to step D
//   step         peak * rate^floor(t / D)   ExponentialDecay(staircase=True); StepLR(D, gamma=rate)
//   exponential  peak * rate^(t / D)        ExponentialDecay(D, rate); ExponentialLR(rate) for D = 1
//
// with t = step - W, and peak * step / W during the warm-up (step < W).
//
//   MIRRORED_ASSIGN_OR_RETURN(LearningRateSchedule s, LearningRateSchedule::ForRun(options, lr, {4, 234, 702}));
//   optimizer.set_learning_rate(static_cast<float>(s.At(step)));   // before the update after `step` ones
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "worker/train/learning_rate_schedule_options.h"

namespace mirrored {

enum class LearningRateDecay { kConstant, kCosine, kStep, kExponential };

struct LearningRateScheduleParams {
  LearningRateDecay decay = LearningRateDecay::kConstant;
  double peak = 1e-3;        // the rate after warm-up, before any decay
  int64_t warmup_steps = 0;  // W
  int64_t decay_steps = 1;   // D: cosine's length, step's and exponential's period
  double decay_rate = 1;     // step, exponential
  double alpha = 0;          // cosine's final fraction of the peak
};

// What the flags' defaults depend on.
struct RunLength {
  int replicas = 1;             // replicas in sync (--scale-lr-by-replicas)
  int64_t steps_per_epoch = 1;  // optimizer steps
  int64_t total_steps = 1;      // of the whole run (--epochs, --max-steps)
};

class LearningRateSchedule {
 public:
  // InvalidArgument for a peak that is not positive and finite, a negative
  // warm-up, decay steps below 1, a decay rate that is not positive, or an
  // alpha outside [0, 1].
  static StatusOr<LearningRateSchedule> Create(const LearningRateScheduleParams& params);
  // From the flags (--lr-schedule, --warmup-steps, --lr-decay-steps,
  // --lr-decay-rate, --lr-alpha, --scale-lr-by-replicas) and the learning
  // rate `lr` (--lr or the optimizer's default), their defaults taken from
  // `run`. InvalidArgument naming the flag: cosine with no step left to
  // decay over after the warm-up.
  static StatusOr<LearningRateSchedule> ForRun(const LearningRateScheduleOptions& options, double lr,
                                               const RunLength& run);

  // The rate of the update that follows `step` updates (Keras evaluates its
  // schedule at optimizer.iterations, before the increment): step 0's
  // warm-up rate is 0.
  double At(int64_t step) const;
  // One line for the log: "cosine from 0.004 over 134 steps to 0 after 100
  // warm-up steps".
  std::string Describe() const;
  const LearningRateScheduleParams& params() const { return params_; }

 private:
  explicit LearningRateSchedule(const LearningRateScheduleParams& params) : params_(params) {}
  double Decayed(int64_t t) const;  // t steps after the warm-up

  LearningRateScheduleParams params_;
};

// "constant", "cosine", "step", "exponential" (--lr-schedule's names).
const char* LearningRateDecayName(LearningRateDecay decay);
StatusOr<LearningRateDecay> ParseLearningRateDecay(const std::string& name);

}  // namespace mirrored
