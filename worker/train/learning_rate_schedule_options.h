// The learning-rate schedule as the flags give it (--lr-schedule and its
// parameters), before a run's length fills in the defaults
// (LearningRateSchedule::ForRun, learning_rate_schedule.h).
//
//   LearningRateScheduleOptions o{.kind = "cosine", .warmup_steps = 100};
//   MIRRORED_ASSIGN_OR_RETURN(auto s, LearningRateSchedule::ForRun(o, /*lr=*/1e-3, run));
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mirrored {

struct LearningRateScheduleOptions {
  std::string kind = "constant";     // --lr-schedule: constant | cosine | step | exponential
  int64_t warmup_steps = 0;          // --warmup-steps: linear warm-up from 0 over the first N optimizer steps
  int64_t decay_steps = 0;           // --lr-decay-steps; 0: cosine the run's steps after warm-up, else one epoch
  std::optional<double> decay_rate;  // --lr-decay-rate; none: step 0.1, exponential 0.96
  double alpha = 0;                  // --lr-alpha: cosine's final rate as a fraction of the peak
  bool scale_by_replicas = false;    // --scale-lr-by-replicas: the linear scaling rule

  // decay_rate, or the schedule's default (step 0.1, exponential 0.96).
  double EffectiveDecayRate() const {
    if (decay_rate) return *decay_rate;
    return kind == "exponential" ? 0.96 : 0.1;
  }
};

}  // namespace mirrored
