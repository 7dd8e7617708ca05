// IDX files of any shape and TFRecord files in real jobs (issue #24): a
// 32x32x3, 7-class IDX set trains under mirrored-launch local with two
// workers and the side-car evaluator, and its checkpoints record the data's
// shape; a TFRecord job stopped mid-epoch resumes bit-identical; the
// evaluator refuses a run directory trained on data of another shape,
// naming both.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/data/image_set_test_util.h"
#include "tests/data/npy_test_util.h"
#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

// SmallDataJob (checkpoint_resume_test_util.h): 20 training examples give 2 steps per epoch.
class DataFormatsJobTest : public CheckpointResumeTest {
 protected:
  // 12x10x3 images whose brightness sets two float targets: train 20, test 8.
  fs::path WriteRegressionNpz() {
    auto split = [](size_t n) {
      data::SyntheticSplit s = data::Synthetic(n, 12, 10, 3, 4);
      std::vector<float> y(n * 2);
      for (size_t i = 0; i < n; ++i) y[2 * i] = 0.5f * float(i % 4), y[2 * i + 1] = 1.0f - 0.25f * float(i % 4);
      s.y = data::Npy<float>("<f4", {n, 2}, y);
      return s;
    };
    const data::SyntheticSplit train = split(20), test = split(8);
    fs::create_directories(dir_);
    const fs::path path = dir_ / "regression.npz";
    data::WriteSplitsNpz(path, train, test);
    return path;
  }
  fs::path WriteTfRecordSet(int h, int w, int c, int classes) {
    const fs::path data = dir_ / ("tfrecord-" + std::to_string(h) + "x" + std::to_string(w));
    data::WriteTfRecords(data / "train-00000-of-00002.tfrecord", data::ImageExamples(12, h, w, c, classes));
    data::WriteTfRecords(data / "train-00001-of-00002.tfrecord", data::ImageExamples(8, h, w, c, classes, false, 12));
    data::WriteTfRecords(data / "test.tfrecord", data::ImageExamples(6, h, w, c, classes));
    return data;
  }
};

TEST_F(DataFormatsJobTest, IdxColourImagesTrainWithTheEvaluator) {
  const fs::path data = dir_ / "idx";
  data::WriteIdxSplit(data, "train", 32, 32, 3, 7, 20);
  data::WriteIdxSplit(data, "t10k", 32, 32, 3, 7, 8);
  std::vector<std::string> argv = SmallDataJob(dir_ / "run", data, "4");
  argv.insert(argv.begin() + 2, "--evaluator");
  ProcessRun run = RunProcess(argv, "", 240s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_NO_FATAL_FAILURE(ExpectEndedWithTheEvaluator(run, dir_ / "run", "[worker:0] done: 4 steps", "ckpt-4"));
  std::ifstream state(dir_ / "run" / "checkpoints" / "ckpt-4" / "state.json");
  const nlohmann::json st = nlohmann::json::parse(state, nullptr, false);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["data_shape"], nlohmann::json({32, 32, 3}));
  EXPECT_EQ(st["classes"], 7);
}

TEST_F(DataFormatsJobTest, TfRecordResumeMidEpochIsBitIdentical) {
  const fs::path data = WriteTfRecordSet(20, 20, 1, 5);
  ProcessRun straight = RunProcess(SmallDataJob(dir_ / "straight", data, "5"), "", 180s);
  ASSERT_TRUE(straight.exit && straight.exit->success()) << straight.output;
  // Step 3 is the middle of epoch 2: the data position in the checkpoint.
  ProcessRun first = RunProcess(SmallDataJob(dir_ / "resumed", data, "3"), "", 180s);
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  ProcessRun second = RunProcess(SmallDataJob(dir_ / "resumed", data, "5"), "", 180s);
  ASSERT_TRUE(second.exit && second.exit->success()) << second.output;
  EXPECT_NE(second.output.find("resuming from"), std::string::npos) << second.output;
  ASSERT_FALSE(Fingerprint(straight.output).empty()) << straight.output;
  EXPECT_EQ(Fingerprint(second.output), Fingerprint(straight.output)) << straight.output << second.output;
}

TEST_F(DataFormatsJobTest, EvaluatorRefusesDataOfAnotherShape) {
  const fs::path data = WriteTfRecordSet(20, 20, 1, 5);
  ProcessRun train = RunProcess(SmallDataJob(dir_ / "run", data, "2"), "", 180s);
  ASSERT_TRUE(train.exit && train.exit->success()) << train.output;
  const fs::path other = WriteTfRecordSet(16, 16, 1, 5);
  ProcessRun eval = RunProcess({kBin + "/mirrored-worker", "--run-dir", (dir_ / "run").string(), "--data",
                                other.string(), "--max-evaluations", "1", "--poll-interval", "0.1"},
                               "", 120s,
                               {"TF_CONFIG={\"cluster\":{\"worker\":[\"localhost:1\"]},"
                                "\"task\":{\"type\":\"evaluator\",\"index\":0}}"});
  ASSERT_TRUE(eval.exit.has_value()) << eval.output;
  EXPECT_EQ(eval.exit->ShellCode(), 2) << eval.output;
  EXPECT_NE(eval.output.find("gives 16x16x1 images in 5 classes, but"), std::string::npos) << eval.output;
  EXPECT_NE(eval.output.find("was trained on 20x20x1 images in 5 classes (its state.json)"), std::string::npos)
      << eval.output;
}

// --loss mse: float targets train with the mean squared error, the metric
// is mse in the lines, metrics.jsonl and the evaluator's, and a resume
// mid-epoch is bit-identical too.
TEST_F(DataFormatsJobTest, MseRegressionTrainsWithTheEvaluatorAndResumes) {
  const fs::path npz = WriteRegressionNpz();
  std::vector<std::string> argv = SmallDataJob(dir_ / "straight", npz, "5", {"--loss", "mse"});
  argv.insert(argv.begin() + 2, "--evaluator");
  ProcessRun straight = RunProcess(argv, "", 240s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(straight.exit && straight.exit->success()) << straight.output;
  EXPECT_NE(straight.output.find("[worker:0] step 5/5 epoch 3 loss "), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find(" mse "), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("validation: val_loss "), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find(" val_mse "), std::string::npos) << straight.output;
  EXPECT_EQ(straight.output.find("accuracy"), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("[evaluator:0] evaluator done:"), std::string::npos) << straight.output;
  std::ifstream metrics(dir_ / "straight" / "metrics.jsonl");
  int with_mse = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("mse") && !j.contains("accuracy")) ++with_mse;
  }
  EXPECT_GE(with_mse, 7) << "5 train lines, validation and eval lines";
  std::ifstream state(dir_ / "straight" / "checkpoints" / "ckpt-5" / "state.json");
  const nlohmann::json st = nlohmann::json::parse(state, nullptr, false);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["loss"], "mse");
  EXPECT_EQ(st["classes"], 2);
  ProcessRun first = RunProcess(SmallDataJob(dir_ / "resumed", npz, "3", {"--loss", "mse"}), "", 180s);
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  ProcessRun second = RunProcess(SmallDataJob(dir_ / "resumed", npz, "5", {"--loss", "mse"}), "", 180s);
  ASSERT_TRUE(second.exit && second.exit->success()) << second.output;
  ASSERT_FALSE(Fingerprint(straight.output).empty()) << straight.output;
  EXPECT_EQ(Fingerprint(second.output), Fingerprint(straight.output)) << straight.output << second.output;
  // The same run directory under the other loss: refused.
  ProcessRun refused = RunProcess(SmallDataJob(dir_ / "resumed", WriteTfRecordSet(12, 10, 3, 2), "7"), "", 180s);
  ASSERT_TRUE(refused.exit.has_value()) << refused.output;
  EXPECT_EQ(refused.exit->ShellCode(), 2) << refused.output;
}

}  // namespace
}  // namespace mirrored
