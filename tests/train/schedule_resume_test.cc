// A learning-rate schedule and gradient accumulation in a real job (2
// workers x 2 CPU replicas, --accumulate-steps 2, cosine after a warm-up):
// steps, --checkpoint-every and the logged learning rate count optimizer
// steps, and a job SIGKILLed mid-run and started again ends with the same
// weights, bit for bit, as one that ran uninterrupted: the schedule is a
// function of the step, which the checkpoint holds.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

const std::vector<std::string> kSchedule = {"--lr-schedule", "cosine", "--warmup-steps", "10", "--lr", "0.002",
                                            "--accumulate-steps", "2", "--batch-per-replica", "16"};

// metrics.jsonl's train lines: step -> learning_rate.
std::map<int64_t, double> LoggedRates(const fs::path& run) {
  std::map<int64_t, double> rates;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j["kind"] == "train") rates[j["step"].get<int64_t>()] = j["learning_rate"].get<double>();
  }
  return rates;
}

using ScheduleResumeTest = CheckpointResumeTest;

TEST_F(ScheduleResumeTest, AccumulatingJobUnderAScheduleResumesBitIdentical) {
  ProcessRun straight = RunProcess(Job(dir_ / "straight", kSchedule));
  ASSERT_TRUE(straight.exit && straight.exit->success()) << straight.output;
  const std::string want = Fingerprint(straight.output);
  ASSERT_FALSE(want.empty()) << straight.output;
  // Global batch 16 x 4 replicas x 2 micro-batches; 60 optimizer steps.
  EXPECT_NE(straight.output.find("global batch 128 (2 micro-batches of 64)"), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("learning rate: cosine from 0.002 to 0 over 50 steps, after 10 warm-up steps"),
            std::string::npos)
      << straight.output;
  EXPECT_NE(straight.output.find("step 60/60"), std::string::npos) << straight.output;
  EXPECT_TRUE(fs::exists(dir_ / "straight" / "checkpoints" / "ckpt-60"));
  EXPECT_TRUE(fs::exists(dir_ / "straight" / "checkpoints" / "ckpt-50"));  // --checkpoint-every 10 optimizer steps
  // The rate each logged step applied: step s's update follows s - 1.
  const auto rates = LoggedRates(dir_ / "straight");
  ASSERT_EQ(rates.size(), 60u);
  EXPECT_FLOAT_EQ(rates.at(1), 0.0);
  EXPECT_FLOAT_EQ(rates.at(6), 0.002 * 5 / 10);
  EXPECT_FLOAT_EQ(rates.at(11), 0.002);
  EXPECT_FLOAT_EQ(rates.at(36), 0.002 * 0.5 * (1 + std::cos(M_PI * 25 / 50)));

  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  const int kill_step = std::uniform_int_distribution<int>(12, 55)(rng);
  ProcessRun killed = RunProcess(Job(dir_ / "resumed", kSchedule), "step " + std::to_string(kill_step) + "/60");
  ASSERT_TRUE(killed.exit.has_value());
  EXPECT_FALSE(killed.exit->success()) << "the job finished before the kill at step " << kill_step;
  ProcessRun resumed = RunProcess(Job(dir_ / "resumed", kSchedule));
  ASSERT_TRUE(resumed.exit && resumed.exit->success()) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  EXPECT_EQ(Fingerprint(resumed.output), want) << "killed at step " << kill_step << "\n" << resumed.output;
  const auto resumed_rates = LoggedRates(dir_ / "resumed");
  for (const auto& [step, rate] : resumed_rates) EXPECT_EQ(rate, rates.at(step)) << "step " << step;
  std::printf("killed at step %d, resumed: fingerprint %s (uninterrupted %s)\n", kill_step,
              Fingerprint(resumed.output).c_str(), want.c_str());
}

}  // namespace
}  // namespace mirrored
