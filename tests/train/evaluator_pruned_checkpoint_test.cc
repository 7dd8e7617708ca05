// An evaluator started after the chief pruned checkpoints (--keep-checkpoints
// with no evaluator following) names the ones it can never evaluate, from the
// index's "pruned" list, and counts them in its last line; started again, it
// has nothing more to say of them. A real mirrored-worker trains; the
// evaluator runs alone on its run directory.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/util/worker_process.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kBin = MIRRORED_BIN_DIR;
const std::string kEvaluatorConfig =
    R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})";

class EvaluatorPrunedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-eval-pruned-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    run_ = dir_ / "run";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<testing_util::WorkerProcess> Start(std::vector<std::string> argv, bool evaluator) {
    argv.insert(argv.begin(), kBin + "/mirrored-worker");
    argv.insert(argv.end(), {"--run-dir", run_.string()});
    std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
    if (evaluator) env.push_back(kEvaluatorConfig);
    auto process = testing_util::WorkerProcess::Start(argv, env);
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? std::move(process).value() : nullptr;
  }

  fs::path dir_, run_;
};

TEST_F(EvaluatorPrunedCheckpointTest, ALateEvaluatorNamesAndCountsThePrunedCheckpoints) {
  // ckpt-10 ... ckpt-60, the newest 2 kept.
  auto chief = Start({"--model", "mlp", "--max-steps", "60", "--checkpoint-every", "10", "--keep-checkpoints", "2",
                      "--no-validate", "--cpu-replicas", "1"},
                     /*evaluator=*/false);
  ASSERT_NE(chief, nullptr);
  auto chief_exit = chief->WaitExit(180s);
  ASSERT_TRUE(chief_exit && chief_exit->success()) << chief->output();
  std::ifstream index_file(run_ / "checkpoints" / "checkpoint");
  const auto index = nlohmann::json::parse(index_file, nullptr, false);
  EXPECT_EQ(index["kept"], (nlohmann::json{"ckpt-50", "ckpt-60"})) << index.dump();
  EXPECT_EQ(index["pruned"], (nlohmann::json{"ckpt-10", "ckpt-20", "ckpt-30", "ckpt-40"})) << index.dump();

  auto late = Start({"--poll-interval", "0.2"}, /*evaluator=*/true);
  ASSERT_NE(late, nullptr);
  auto late_exit = late->WaitExit(60s);
  ASSERT_TRUE(late_exit.has_value()) << late->output();
  EXPECT_TRUE(late_exit->success()) << late->output();
  EXPECT_NE(late->output().find("ckpt-10, ckpt-20, ckpt-30 and ckpt-40 were pruned by the chief before this "
                                "evaluator could evaluate them"),
            std::string::npos)
      << late->output();
  EXPECT_NE(late->output().find("evaluator done: 2 checkpoint(s) (4 pruned by the chief before this evaluator saw "
                                "them: ckpt-10 to ckpt-40); final checkpoint ckpt-60: "),
            std::string::npos)
      << late->output();

  // Started again: everything after its progress (ckpt-60) was evaluated;
  // the pruned ones are older and were said before.
  auto again = Start({"--poll-interval", "0.2"}, /*evaluator=*/true);
  ASSERT_NE(again, nullptr);
  auto again_exit = again->WaitExit(60s);
  ASSERT_TRUE(again_exit.has_value()) << again->output();
  EXPECT_TRUE(again_exit->success()) << again->output();
  EXPECT_EQ(again->output().find("pruned by the chief"), std::string::npos) << again->output();
  EXPECT_NE(again->output().find("was evaluated before"), std::string::npos) << again->output();
}

}  // namespace
}  // namespace mirrored
