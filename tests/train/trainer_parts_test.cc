// The trainer's pure pieces: the settings every task must agree on, the
// divergence message, who a SIGTERM reached first, the weights' fingerprint.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "worker/train/diverged_error.h"
#include "worker/train/preempted_tasks.h"
#include "worker/train/replica_fingerprint.h"
#include "worker/train/training_settings.h"

namespace mirrored {
namespace {

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(TrainerPartsTest, TrainingSettingsNameTheFlagsAndTheData) {
  TrainerOptions o;
  o.optimizer.name = "sgd";
  const auto list = TrainingSettings(o, 60000, 10000);
  const std::map<std::string, std::string> settings(list.begin(), list.end());
  EXPECT_EQ(settings.size(), list.size());  // each named once
  EXPECT_EQ(list.front().first, "--model");
  EXPECT_EQ(settings.at("--lr"), "0.01");  // the rate it takes effect as
  EXPECT_EQ(settings.at("--bucket-mb"), "25");
  EXPECT_EQ(settings.at("--allreduce-dtype"), "fp32");  // every task must send the same bytes
  EXPECT_EQ(settings.at("training examples (--data)"), "60000");
  EXPECT_EQ(settings.at("test examples (--data)"), "10000");
  o.validation.test_set = false;
  const auto without = TrainingSettings(o, 60000, 0);
  const std::map<std::string, std::string> without_map(without.begin(), without.end());
  EXPECT_EQ(without_map.at("test examples (--data)"), "-");
}

TEST(TrainerPartsTest, Fp16TasksMustAlsoAgreeOnTheInitialLossScale) {
  TrainerOptions o;
  const auto fp32 = TrainingSettings(o, 60000, 10000);
  const std::map<std::string, std::string> fp32_map(fp32.begin(), fp32.end());
  EXPECT_EQ(fp32_map.at("--precision"), "fp32");
  EXPECT_EQ(fp32_map.count("--initial-loss-scale"), 0u);  // means nothing without fp16
  o.model.precision = "fp16";
  o.model.initial_loss_scale = 1024;
  const auto fp16 = TrainingSettings(o, 60000, 10000);
  const std::map<std::string, std::string> fp16_map(fp16.begin(), fp16.end());
  EXPECT_EQ(fp16_map.at("--initial-loss-scale"), "1024");
}

TEST(TrainerPartsTest, ADivergedLossNamesItsStepsAndIsAConfigurationError) {
  TrainerOptions o;
  o.checkpoints.run_dir = "/tmp/run";
  const Status s = DivergedError(std::numeric_limits<float>::infinity(), 11, 20, 0, 10, /*chief=*/true, o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);  // exit 2: a restart replays the same steps
  EXPECT_TRUE(Has(s, "the mean loss over steps 11-20 is inf (epoch 1)")) << s.message();
  EXPECT_TRUE(Has(s, "ckpt-10, is from before")) << s.message();
  EXPECT_TRUE(Has(s, "Try a lower --lr (now 0.001, adam)")) << s.message();
  EXPECT_TRUE(Has(DivergedError(std::nanf(""), 5, 5, 2, -1, true, o), "over step 5 is nan (epoch 3)"));
}

TEST(TrainerPartsTest, DivergedWeightsSayWhatIsSaved) {
  TrainerOptions o;
  EXPECT_TRUE(Has(DivergedError(std::nullopt, 7, 7, 0, -1, true, o), "the weights after step 7 are not finite"));
  EXPECT_TRUE(Has(DivergedError(std::nullopt, 7, 7, 0, -1, true, o), "Nothing is saved (no --run-dir)"));
  o.checkpoints.run_dir = "/tmp/run";
  EXPECT_TRUE(Has(DivergedError(std::nullopt, 7, 7, 0, -1, true, o), "No checkpoint was written yet"));
  EXPECT_TRUE(Has(DivergedError(std::nullopt, 7, 7, 0, 5, false, o), "The chief's log names its latest checkpoint"));
}

TEST(TrainerPartsTest, PreemptedTasksNamesTheOneTaskOrSaysSeveral) {
  const std::vector<std::string> tasks = {"chief:0", "worker:0", "worker:1"};
  // Two replicas each (6 in all). worker:0 (k = 2) alone: told 2, sum k 4, sum k*k 8.
  EXPECT_EQ(PreemptedTasks(tasks, 2, 4, 8, 6), "first seen by worker:0");
  // chief:0 and worker:1, one replica each: told 2, sum k 1 + 3, sum k*k 1 + 9.
  EXPECT_EQ(PreemptedTasks(tasks, 2, 4, 10, 6), "first seen by several tasks: 2 of 6 replicas");
  EXPECT_EQ(PreemptedTasks(tasks, 6, 12, 28, 6), "seen by every task");
  EXPECT_EQ(PreemptedTasks({"worker:0"}, 2, 2, 2, 2), "seen by worker:0");
}

TEST(TrainerPartsTest, TheFingerprintFollowsEveryBitAndItsOrder) {
  const std::vector<float> w = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(WeightsFingerprint(w), WeightsFingerprint({1.0f, 2.0f, 3.0f}));
  EXPECT_NE(WeightsFingerprint(w), WeightsFingerprint({1.0f, 3.0f, 2.0f}));
  EXPECT_NE(WeightsFingerprint(w), WeightsFingerprint({1.0f, 2.0f, std::nextafter(3.0f, 4.0f)}));
  const float fp = WeightsFingerprint(w);
  EXPECT_EQ(fp, static_cast<float>(static_cast<uint32_t>(fp)));  // an integer below 2^24: exact in a float
  EXPECT_LT(fp, 16777216.0f);
}

}  // namespace
}  // namespace mirrored
