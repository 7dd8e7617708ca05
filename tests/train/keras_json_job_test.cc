// --model-json in real jobs: a Keras 3 residual CNN trains under
// mirrored-launch local with two workers and the side-car evaluator, which
// rebuilds the model from the checkpoint's state.json and evaluates it; the
// chief exports it for Keras (RUN_DIR/export); the run resumes with the same model and refuses another one; a model that
// does not fit the data, a malformed file and an unsupported layer exit 2
// naming the file and what is wrong, before joining a job.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/data/npy_test_util.h"
#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

const std::string kKeras = std::string(MIRRORED_SOURCE_DIR) + "/tests/model/keras/";

class KerasJsonJobTest : public CheckpointResumeTest {
 protected:
  // train: 24 examples, test: 8, of 32x32x3 uint8 pixels, 7 classes.
  fs::path WriteNpz(size_t h = 32) {
    fs::create_directories(dir_);
    data::SyntheticSplit train = data::Synthetic(24, h, 32, 3, 7), test = data::Synthetic(8, h, 32, 3, 7, 1);
    const fs::path path = dir_ / ("data" + std::to_string(h) + ".npz");
    data::WriteSplitsNpz(path, train, test);
    return path;
  }
  // Two workers x 1 CPU replica x batch 4: 3 steps per epoch.
  std::vector<std::string> KerasJob(const fs::path& run, const fs::path& npz, const std::string& model_json,
                                    const std::string& max_steps) {
    return {kBin + "/mirrored-launch", "local", "--workers", "2", "--run-dir", run.string(), "--",
            "--data", npz.string(), "--model-json", model_json, "--batch-per-replica", "4", "--max-steps", max_steps,
            "--checkpoint-every", "2", "--log-every", "1", "--poll-interval", "0.1", "--epochs", "10"};
  }
};

TEST_F(KerasJsonJobTest, TrainsWithTheEvaluatorAndResumesTheSameModel) {
  const fs::path npz = WriteNpz();
  std::vector<std::string> argv = KerasJob(dir_ / "run", npz, kKeras + "keras3_functional_resnet.json", "4");
  argv.insert(argv.begin() + 2, "--evaluator");
  ProcessRun run = RunProcess(argv, "", 300s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_NO_FATAL_FAILURE(ExpectEndedWithTheEvaluator(run, dir_ / "run", "training keras:resnet_cifar on", "ckpt-4"));
  std::ifstream state(dir_ / "run" / "checkpoints" / "ckpt-4" / "state.json");
  const nlohmann::json st = nlohmann::json::parse(state);
  EXPECT_EQ(st["model"], "keras:resnet_cifar");
  EXPECT_EQ(st["model_json"]["config"]["name"], "resnet_cifar");
  // The chief's export for Keras at the end: the model as given, and its weights.
  const fs::path exported = dir_ / "run" / "export";
  ASSERT_TRUE(fs::exists(exported / "model.json") && fs::exists(exported / "model.weights.h5")) << run.output;
  std::ifstream json(exported / "model.json");
  EXPECT_EQ(nlohmann::json::parse(json), st["model_json"]);
  EXPECT_NE(run.output.find("weights for Keras: " + (exported / "model.json").string()), std::string::npos)
      << run.output;

  ProcessRun resumed = RunProcess(KerasJob(dir_ / "run", npz, kKeras + "keras3_functional_resnet.json", "6"), "",
                                  240s, {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(resumed.exit && resumed.exit->success()) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  // Another model into the same run directory: refused.
  ProcessRun other = RunProcess(KerasJob(dir_ / "run", npz, kKeras + "keras3_residual_no_bn.json", "8"), "", 240s,
                                {"MIRRORED_DATA_CACHE=off"});
  ASSERT_TRUE(other.exit.has_value()) << other.output;
  EXPECT_EQ(other.exit->ShellCode(), 2) << other.output;
  EXPECT_NE(other.output.find("(keras:residual_cifar) does not match the run directory's checkpoint"),
            std::string::npos)
      << other.output;
}

TEST_F(KerasJsonJobTest, DryRunRefusesWhatDoesNotFitNamingTheFile) {
  const fs::path npz = WriteNpz(28);
  const fs::path cut = dir_ / "cut.json";
  {
    std::ifstream in(kKeras + "keras3_mlp.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut) << text.substr(0, text.size() / 3);
  }
  struct Case {
    std::string model_json;
    std::vector<std::string> says;
  } cases[] = {
      {kKeras + "keras3_functional_resnet.json",
       {"keras3_functional_resnet.json: the model takes 32x32x3 inputs", "--data gives 28x32x3 images"}},
      {cut.string(), {"cut.json: not valid JSON"}},
      {kKeras + "tf_keras_refused_unknown_layer.json", {"(DepthwiseConv2D) is not supported"}},
      {kKeras + "keras3_refused_dilated_conv.json", {"\"dilation_rate\" is [2,2]"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = KerasJob(dir_ / "run", npz, c.model_json, "4");
    argv.insert(argv.begin() + 2, "--dry-run");
    ProcessRun run = RunProcess(argv, "", 60s);
    ASSERT_TRUE(run.exit.has_value()) << run.output;
    EXPECT_EQ(run.exit->ShellCode(), 2) << run.output;
    for (const std::string& s : c.says) EXPECT_NE(run.output.find(s), std::string::npos) << s << " in " << run.output;
  }
}

}  // namespace
}  // namespace mirrored
