// NumPy data in real jobs: a synthetic 12x10x3, 4-class .npz trains under
// mirrored-launch local with two workers and the side-car evaluator; a job
// stopped mid-epoch resumes bit-identical, and refuses other data; mirrored-
// launch --dry-run refuses images too small for cnn naming both shapes.
#include <gtest/gtest.h>

#include "tests/data/npy_test_util.h"
#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

class NumpyDataJobTest : public CheckpointResumeTest {
 protected:
  // train: 20 examples (2 steps per epoch in SmallDataJob), test: 8, of
  // 12x10x3 uint8 pixels, 4 classes.
  fs::path WriteNpz(size_t h = 12, size_t w = 10) {
    fs::create_directories(dir_);
    data::SyntheticSplit train = data::Synthetic(20, h, w, 3, 4), test = data::Synthetic(8, h, w, 3, 4, 1);
    const fs::path path = dir_ / "data.npz";
    data::WriteSplitsNpz(path, train, test);
    return path;
  }
};

TEST_F(NumpyDataJobTest, NpzTrainsTwoWorkersWithTheEvaluator) {
  const fs::path npz = WriteNpz();
  std::vector<std::string> argv = SmallDataJob(dir_ / "run", npz, "4");
  argv.insert(argv.begin() + 2, "--evaluator");
  ProcessRun run = RunProcess(argv, "", 240s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_NO_FATAL_FAILURE(ExpectEndedWithTheEvaluator(run, dir_ / "run", "[worker:0] done: 4 steps", "ckpt-4"));
  const size_t at = run.output.find("[evaluator:0] evaluator done:");
  std::printf("%s\n", run.output.substr(at, run.output.find('\n', at) - at).c_str());
}

TEST_F(NumpyDataJobTest, ResumeMidEpochIsBitIdentical) {
  const fs::path npz = WriteNpz();
  ProcessRun straight = RunProcess(SmallDataJob(dir_ / "straight", npz, "5"), "", 180s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(straight.exit && straight.exit->success()) << straight.output;
  // Step 3 is the middle of epoch 2 (2 steps per epoch): the data position
  // in the checkpoint, not the epoch's start, is where the second run goes on.
  ProcessRun first = RunProcess(SmallDataJob(dir_ / "resumed", npz, "3"), "", 180s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  ProcessRun second = RunProcess(SmallDataJob(dir_ / "resumed", npz, "5"), "", 180s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(second.exit && second.exit->success()) << second.output;
  EXPECT_NE(second.output.find("resuming from"), std::string::npos) << second.output;
  ASSERT_FALSE(Fingerprint(straight.output).empty()) << straight.output;
  EXPECT_EQ(Fingerprint(second.output), Fingerprint(straight.output)) << straight.output << second.output;
  // The same run directory given other images: refused, naming both.
  const fs::path other = WriteNpz(12, 9);
  ProcessRun refused = RunProcess(SmallDataJob(dir_ / "resumed", other, "7"), "", 180s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(refused.exit.has_value()) << refused.output;
  EXPECT_EQ(refused.exit->ShellCode(), 2) << refused.output;
  EXPECT_NE(refused.output.find("gives 12x9x3 images in 4 classes, but"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("was trained on other data (tensor dense1/kernel is [360,256] there, [324,256]"),
            std::string::npos)
      << refused.output;
}

TEST_F(NumpyDataJobTest, DryRunRefusesImagesTooSmallForCnn) {
  const fs::path npz = WriteNpz(8, 12);
  std::vector<std::string> argv = SmallDataJob(dir_ / "run", npz, "4");
  argv.insert(argv.begin() + 2, "--dry-run");
  for (auto& a : argv) {
    if (a == "mlp") a = "cnn";
  }
  ProcessRun run = RunProcess(argv, "", 60s);
  ASSERT_TRUE(run.exit.has_value()) << run.output;
  EXPECT_EQ(run.exit->ShellCode(), 2) << run.output;
  EXPECT_NE(run.output.find("--model cnn needs images of at least 10x10xC"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--data gives 8x12x3"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace mirrored
