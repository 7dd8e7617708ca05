#include "worker/train/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace mirrored {
namespace {

std::string Number(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", x);
  return text;
}

std::string Steps(int64_t n) { return std::to_string(n) + (n == 1 ? " step" : " steps"); }

// The decay steps the flags give, or their default for this run.
StatusOr<int64_t> DecayStepsFor(LearningRateDecay decay, const LearningRateScheduleOptions& o, const RunLength& run) {
  if (o.decay_steps > 0) return o.decay_steps;
  switch (decay) {
    case LearningRateDecay::kConstant:
      return int64_t{1};  // unused
    case LearningRateDecay::kStep:
    case LearningRateDecay::kExponential:
      return run.steps_per_epoch;
    case LearningRateDecay::kCosine:
      break;
  }
  const int64_t after_warmup = run.total_steps - o.warmup_steps;
  if (after_warmup < 1) {
    return InvalidArgumentError("--warmup-steps " + std::to_string(o.warmup_steps) + " leaves none of the run's " +
                                Steps(run.total_steps) +
                                " for --lr-schedule cosine to decay over: give fewer warm-up steps, or "
                                "--lr-decay-steps");
  }
  return after_warmup;
}

}  // namespace

const char* LearningRateDecayName(LearningRateDecay decay) {
  switch (decay) {
    case LearningRateDecay::kConstant:
      return "constant";
    case LearningRateDecay::kCosine:
      return "cosine";
    case LearningRateDecay::kStep:
      return "step";
    case LearningRateDecay::kExponential:
      return "exponential";
  }
  return "?";
}

StatusOr<LearningRateDecay> ParseLearningRateDecay(const std::string& name) {
  for (LearningRateDecay d : {LearningRateDecay::kConstant, LearningRateDecay::kCosine, LearningRateDecay::kStep,
                              LearningRateDecay::kExponential}) {
    if (name == LearningRateDecayName(d)) return d;
  }
  return InvalidArgumentError("--lr-schedule \"" + name + "\" is not one of constant, cosine, step, exponential");
}

StatusOr<LearningRateSchedule> LearningRateSchedule::Create(const LearningRateScheduleParams& p) {
  if (!(p.peak > 0) || !std::isfinite(p.peak)) {
    return InvalidArgumentError("learning rate " + Number(p.peak) + " must be a positive number");
  }
  if (p.warmup_steps < 0) {
    return InvalidArgumentError("--warmup-steps " + std::to_string(p.warmup_steps) + " must not be negative");
  }
  if (p.decay_steps < 1) {
    return InvalidArgumentError("--lr-decay-steps " + std::to_string(p.decay_steps) + " must be at least 1");
  }
  if (!(p.decay_rate > 0) || !std::isfinite(p.decay_rate)) {
    return InvalidArgumentError("--lr-decay-rate " + Number(p.decay_rate) + " must be a positive number");
  }
  if (!(p.alpha >= 0 && p.alpha <= 1)) {
    return InvalidArgumentError("--lr-alpha " + Number(p.alpha) + " must be a number from 0 to 1");
  }
  return LearningRateSchedule(p);
}

StatusOr<LearningRateSchedule> LearningRateSchedule::ForRun(const LearningRateScheduleOptions& o, double lr,
                                                            const RunLength& run) {
  LearningRateScheduleParams p;
  MIRRORED_ASSIGN_OR_RETURN(p.decay, ParseLearningRateDecay(o.kind));
  p.peak = lr * (o.scale_by_replicas ? run.replicas : 1);
  p.warmup_steps = o.warmup_steps;
  MIRRORED_ASSIGN_OR_RETURN(p.decay_steps, DecayStepsFor(p.decay, o, run));
  if (p.decay == LearningRateDecay::kStep || p.decay == LearningRateDecay::kExponential) {
    p.decay_rate = o.EffectiveDecayRate();
  }
  if (p.decay == LearningRateDecay::kCosine) p.alpha = o.alpha;
  return Create(p);
}

double LearningRateSchedule::At(int64_t step) const {
  const LearningRateScheduleParams& p = params_;
  if (step < p.warmup_steps) return p.peak * static_cast<double>(step) / static_cast<double>(p.warmup_steps);
  return Decayed(step - p.warmup_steps);
}

double LearningRateSchedule::Decayed(int64_t t) const {
  const LearningRateScheduleParams& p = params_;
  const double d = static_cast<double>(p.decay_steps);
  switch (p.decay) {
    case LearningRateDecay::kConstant:
      return p.peak;
    case LearningRateDecay::kCosine: {
      const double done = static_cast<double>(std::min(t, p.decay_steps)) / d;
      const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * done));
      return p.peak * ((1.0 - p.alpha) * cosine + p.alpha);
    }
    case LearningRateDecay::kStep:
      return p.peak * std::pow(p.decay_rate, static_cast<double>(t / p.decay_steps));
    case LearningRateDecay::kExponential:
      return p.peak * std::pow(p.decay_rate, static_cast<double>(t) / d);
  }
  return p.peak;
}

std::string LearningRateSchedule::Describe() const {
  const LearningRateScheduleParams& p = params_;
  std::string s;
  switch (p.decay) {
    case LearningRateDecay::kConstant:
      s = "constant " + Number(p.peak);
      break;
    case LearningRateDecay::kCosine:
      s = "cosine from " + Number(p.peak) + " to " + Number(p.peak * p.alpha) + " over " + Steps(p.decay_steps);
      break;
    case LearningRateDecay::kStep:
      s = "step: " + Number(p.peak) + ", x " + Number(p.decay_rate) + " every " + Steps(p.decay_steps);
      break;
    case LearningRateDecay::kExponential:
      s = "exponential: " + Number(p.peak) + " x " + Number(p.decay_rate) + "^(step / " +
          std::to_string(p.decay_steps) + ")";
      break;
  }
  if (p.warmup_steps > 0) s += ", after " + std::to_string(p.warmup_steps) + " warm-up step" +
                               (p.warmup_steps == 1 ? "" : "s") + " from 0";
  return s;
}

}  // namespace mirrored
