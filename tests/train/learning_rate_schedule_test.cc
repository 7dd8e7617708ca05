// Learning-rate schedules against their formulas (Keras' schedules in
// closed form: tf_keras/src/optimizers/schedules/learning_rate_schedule.py;
// PyTorch's StepLR and CosineAnnealingLR give the same values), the flags
// that define them (each refused naming itself) and their defaults taken
// from the run, and the settings every task must agree on.
#include "worker/train/learning_rate_schedule.h"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "worker/role_options.h"
#include "worker/train/training_settings.h"

namespace mirrored {
namespace {

constexpr double kPi = 3.14159265358979323846;

Status Parse(std::vector<std::string> args, WorkerOptions* options) {
  CLI::App app;
  options->Register(app);
  std::vector<const char*> argv = {"mirrored-worker"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  return options->Validate();
}

// The schedule the parsed flags give, as mirrored-worker hands them to the trainer.
StatusOr<LearningRateSchedule> ForRun(const WorkerOptions& flags, const RunLength& run) {
  const TrainerOptions o = TrainerOptionsFrom(flags);
  return LearningRateSchedule::ForRun(o.schedule, o.optimizer.EffectiveLearningRate(), run);
}

LearningRateSchedule Make(const LearningRateScheduleParams& p) {
  auto s = LearningRateSchedule::Create(p);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

LearningRateSchedule FromFlags(std::vector<std::string> args, RunLength run) {
  WorkerOptions o;
  Status parsed = Parse(std::move(args), &o);
  EXPECT_TRUE(parsed.ok()) << parsed;
  auto s = ForRun(o, run);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(LearningRateScheduleTest, ConstantIsThePeakAtEveryStep) {
  const auto s = Make({.decay = LearningRateDecay::kConstant, .peak = 0.001});
  for (int64_t step : {0, 1, 1000, 1000000}) EXPECT_EQ(s.At(step), 0.001);
}

// Keras' CosineDecay(initial_learning_rate=0, warmup_target=0.1,
// warmup_steps=10, decay_steps=100, alpha=0.1).
TEST(LearningRateScheduleTest, CosineWithWarmupIsKerasCosineDecay) {
  const auto s = Make({.decay = LearningRateDecay::kCosine, .peak = 0.1, .warmup_steps = 10, .decay_steps = 100,
                       .alpha = 0.1});
  auto cosine = [](double t) { return 0.1 * (0.9 * 0.5 * (1 + std::cos(kPi * std::min(t, 100.0) / 100)) + 0.1); };
  EXPECT_EQ(s.At(0), 0.0);  // Keras' first update is at the warm-up's start
  EXPECT_DOUBLE_EQ(s.At(1), 0.01);
  EXPECT_DOUBLE_EQ(s.At(5), 0.05);
  EXPECT_DOUBLE_EQ(s.At(10), 0.1);  // the peak, where the decay starts
  EXPECT_DOUBLE_EQ(s.At(35), cosine(25));
  EXPECT_DOUBLE_EQ(s.At(60), 0.1 * (0.9 * 0.5 + 0.1));  // half way: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(s.At(110), 0.01);                      // alpha x peak at the end...
  EXPECT_DOUBLE_EQ(s.At(5000), 0.01);                     // ...and after it (Keras clamps)
}

// PyTorch's StepLR(step_size=30, gamma=0.5) = Keras' ExponentialDecay(30, 0.5, staircase=True).
TEST(LearningRateScheduleTest, StepIsStepLR) {
  const auto s = Make({.decay = LearningRateDecay::kStep, .peak = 0.2, .decay_steps = 30, .decay_rate = 0.5});
  EXPECT_EQ(s.At(0), 0.2);
  EXPECT_EQ(s.At(29), 0.2);
  EXPECT_DOUBLE_EQ(s.At(30), 0.1);
  EXPECT_DOUBLE_EQ(s.At(59), 0.1);
  EXPECT_DOUBLE_EQ(s.At(60), 0.05);
  EXPECT_DOUBLE_EQ(s.At(95), 0.2 * 0.125);
}

// Keras' ExponentialDecay(1e-3, decay_steps=1000, decay_rate=0.96):
// its docs' example, 1e-3 * 0.96^(step / 1000).
TEST(LearningRateScheduleTest, ExponentialIsKerasExponentialDecay) {
  const auto s =
      Make({.decay = LearningRateDecay::kExponential, .peak = 1e-3, .decay_steps = 1000, .decay_rate = 0.96});
  EXPECT_EQ(s.At(0), 1e-3);
  EXPECT_DOUBLE_EQ(s.At(500), 1e-3 * std::sqrt(0.96));
  EXPECT_DOUBLE_EQ(s.At(1000), 1e-3 * 0.96);
  EXPECT_DOUBLE_EQ(s.At(2500), 1e-3 * std::pow(0.96, 2.5));
}

// The decay counts from the warm-up's end, as PyTorch's SequentialLR starts
// its second scheduler at the milestone.
TEST(LearningRateScheduleTest, WarmupRisesLinearlyFromZeroThenTheDecayStarts) {
  const auto s = Make(
      {.decay = LearningRateDecay::kStep, .peak = 1.0, .warmup_steps = 4, .decay_steps = 2, .decay_rate = 0.5});
  const std::vector<double> want = {0, 0.25, 0.5, 0.75, 1, 1, 0.5, 0.5, 0.25};
  for (size_t step = 0; step < want.size(); ++step) EXPECT_DOUBLE_EQ(s.At(int64_t(step)), want[step]) << step;
}

TEST(LearningRateScheduleTest, DefaultsComeFromTheRun) {
  const RunLength run{.replicas = 4, .steps_per_epoch = 234, .total_steps = 702};
  // cosine: over the steps after the warm-up, to 0.
  auto cosine = FromFlags({"--lr-schedule", "cosine", "--warmup-steps", "2"}, run);
  EXPECT_EQ(cosine.params().decay_steps, 700);
  EXPECT_EQ(cosine.params().alpha, 0.0);
  EXPECT_DOUBLE_EQ(cosine.At(702), 0.0);
  // step: 0.1 each epoch; exponential: 0.96 each epoch.
  auto step = FromFlags({"--lr-schedule", "step", "--optimizer", "sgd"}, run);
  EXPECT_EQ(step.params().decay_steps, 234);
  EXPECT_EQ(step.params().decay_rate, 0.1);
  EXPECT_DOUBLE_EQ(step.At(234), 1e-3);
  auto exponential = FromFlags({"--lr-schedule", "exponential"}, run);
  EXPECT_EQ(exponential.params().decay_steps, 234);
  EXPECT_EQ(exponential.params().decay_rate, 0.96);
  // Given flags win.
  auto given = FromFlags({"--lr-schedule", "exponential", "--lr-decay-steps", "10", "--lr-decay-rate", "0.5"}, run);
  EXPECT_EQ(given.params().decay_steps, 10);
  EXPECT_EQ(given.params().decay_rate, 0.5);
}

TEST(LearningRateScheduleTest, TheLinearScalingRuleMultipliesByTheReplicas) {
  const RunLength run{.replicas = 8, .steps_per_epoch = 10, .total_steps = 10};
  EXPECT_DOUBLE_EQ(FromFlags({"--lr", "0.1", "--scale-lr-by-replicas"}, run).At(3), 0.8);
  EXPECT_DOUBLE_EQ(FromFlags({"--lr", "0.1"}, run).At(3), 0.1);
  auto warm = FromFlags({"--scale-lr-by-replicas", "--warmup-steps", "4"}, run);  // adam's 1e-3
  EXPECT_DOUBLE_EQ(warm.At(2), 0.004);
  EXPECT_DOUBLE_EQ(warm.At(4), 0.008);
}

TEST(LearningRateScheduleTest, CosineWithNoStepLeftAfterTheWarmupIsRefused) {
  WorkerOptions o;
  ASSERT_TRUE(Parse({"--lr-schedule", "cosine", "--warmup-steps", "50"}, &o).ok());
  auto s = ForRun(o, {.replicas = 1, .steps_per_epoch = 50, .total_steps = 50});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s.status(), "--warmup-steps 50 leaves none of the run's 50 steps")) << s.status();
  ASSERT_TRUE(Parse({"--lr-schedule", "cosine", "--warmup-steps", "50", "--lr-decay-steps", "20"}, &o).ok());
  EXPECT_TRUE(ForRun(o, {.replicas = 1, .steps_per_epoch = 50, .total_steps = 50}).ok());
}

TEST(LearningRateScheduleTest, BadFlagsAreRefusedNamingTheFlagAndValue) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr-schedule", "linear"}, "--lr-schedule \"linear\" is not one of constant, cosine, step, exponential"},
      {{"--warmup-steps", "-1"}, "--warmup-steps"},
      {{"--lr-schedule", "step", "--lr-decay-steps", "-3"}, "--lr-decay-steps -3 must not be negative"},
      {{"--lr-decay-steps", "10"}, "--lr-decay-steps 10 needs --lr-schedule cosine, step or exponential"},
      {{"--lr-schedule", "step", "--lr-decay-rate", "0"}, "--lr-decay-rate 0 must be a positive number"},
      {{"--lr-schedule", "cosine", "--lr-decay-rate", "0.5"}, "--lr-decay-rate 0.5 needs --lr-schedule step or "
                                                              "exponential (it is cosine)"},
      {{"--lr-schedule", "cosine", "--lr-alpha", "1.5"}, "--lr-alpha 1.5 must be a number from 0 to 1"},
      {{"--lr-schedule", "step", "--lr-alpha", "0.1"}, "--lr-alpha 0.1 needs --lr-schedule cosine (it is step)"},
      {{"--accumulate-steps", "0"}, "--accumulate-steps 0 is out of range: 1 to 4096"},
      {{"--accumulate-steps", "5000"}, "--accumulate-steps 5000 is out of range"},
      {{"--accumulate-steps", "1.5"}, "--accumulate-steps"},
  };
  for (const auto& [args, want] : cases) {
    WorkerOptions o;
    const Status s = Parse(args, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << args[0] << " " << args[1];
    EXPECT_TRUE(Has(s, want)) << s.message();
  }
  WorkerOptions ok;
  EXPECT_TRUE(Parse({"--lr-schedule", "cosine", "--lr-alpha", "0", "--lr-decay-steps", "5", "--warmup-steps", "0",
                     "--accumulate-steps", "4096"},
                    &ok)
                  .ok());
}

// Tasks that disagree on the schedule or the accumulation would apply other
// updates (or all-reduce at other steps): the job compares them.
TEST(LearningRateScheduleTest, TasksAgreeOnTheScheduleFlags) {
  WorkerOptions o;
  ASSERT_TRUE(Parse({"--lr-schedule", "exponential", "--warmup-steps", "5", "--accumulate-steps", "2",
                     "--scale-lr-by-replicas"},
                    &o)
                  .ok());
  const auto list = TrainingSettings(TrainerOptionsFrom(o), 60000, 10000);
  const std::map<std::string, std::string> settings(list.begin(), list.end());
  EXPECT_EQ(settings.size(), list.size());
  EXPECT_EQ(settings.at("--lr-schedule"), "exponential");
  EXPECT_EQ(settings.at("--warmup-steps"), "5");
  EXPECT_EQ(settings.at("--accumulate-steps"), "2");
  EXPECT_EQ(settings.at("--scale-lr-by-replicas"), "on");
  EXPECT_EQ(settings.at("--lr-decay-steps"), "auto");
  EXPECT_EQ(settings.at("--lr-decay-rate"), "0.96");
  EXPECT_EQ(settings.count("--lr-alpha"), 0u);
  WorkerOptions constant;
  const auto plain = TrainingSettings(TrainerOptionsFrom(constant), 60000, 10000);
  const std::map<std::string, std::string> plain_map(plain.begin(), plain.end());
  EXPECT_EQ(plain_map.at("--lr-schedule"), "constant");
  EXPECT_EQ(plain_map.at("--accumulate-steps"), "1");
  EXPECT_EQ(plain_map.count("--lr-decay-steps"), 0u);  // means nothing for a constant rate
}

}  // namespace
}  // namespace mirrored
