// The evaluator and the checkpoints it skips (damaged when it loads them):
// a skipped step is never recorded in its lease as evaluated, and one
// skipped once, due for its second look when --max-evaluations or
// --eval-timeout stops the evaluator, is either given that look or named as
// not evaluated in the last line (it was counted as skipped on one look).
// A real mirrored-worker trains the checkpoints; the evaluator runs alone on
// its run directory.
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
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

class EvaluatorSkippedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-eval-skipped-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    run_ = dir_ / "run";
    // ckpt-10, ckpt-20 and ckpt-30 (final), and the training-done record.
    auto chief = testing_util::WorkerProcess::Start(
        {kBin + "/mirrored-worker", "--model", "mlp", "--max-steps", "30", "--checkpoint-every", "10",
         "--no-validate", "--cpu-replicas", "1", "--run-dir", run_.string()},
        {"PATH=/usr/bin:/bin"});
    ASSERT_TRUE(chief.ok()) << chief.status();
    auto exit = (*chief)->WaitExit(180s);
    ASSERT_TRUE(exit && exit->success()) << (*chief)->output();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Model(int64_t step) const {
    return run_ / "checkpoints" / ("ckpt-" + std::to_string(step)) / "model.safetensors";
  }
  // Overwrites 8 bytes of ckpt-<step>'s weights (its CRC-32C no longer
  // matches: it fails to load), keeping what was there for Repair.
  void Damage(int64_t step) {
    std::fstream f(Model(step), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    f.read(good_[step].data(), 8);
    f.seekp(-100, std::ios::end);
    f.write("ZZZZZZZZ", 8);
  }
  void Repair(int64_t step) {
    std::fstream f(Model(step), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.write(good_[step].data(), 8);
  }
  nlohmann::json Lease() const {
    std::ifstream in(run_ / "checkpoints" / "eval-lease");
    return nlohmann::json::parse(in, nullptr, false);
  }
  std::unique_ptr<testing_util::WorkerProcess> StartEvaluator(std::vector<std::string> flags) {
    std::vector<std::string> argv = {kBin + "/mirrored-worker", "--run-dir", run_.string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto process = testing_util::WorkerProcess::Start(argv, {"PATH=/usr/bin:/bin", kEvaluatorConfig});
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? std::move(process).value() : nullptr;
  }

  fs::path dir_, run_;
  std::map<int64_t, std::array<char, 8>> good_;
};

// ckpt-10 and ckpt-30 damaged on the first poll; ckpt-10 repaired before the
// second, which evaluates it (older, after ckpt-20) and reaches
// --max-evaluations 2 before ckpt-30's second look. The lease recorded
// step 30 as evaluated (the evaluator's progress counted the steps it passed
// over): the evaluator started again resumed after ckpt-30, said the job's
// last checkpoint "was evaluated before" and exited 0, though it never was.
TEST_F(EvaluatorSkippedCheckpointTest, ASkippedCheckpointIsNeverRecordedAsEvaluated) {
  Damage(10);
  Damage(30);
  // Polls 10 s apart: far longer than the test takes to repair ckpt-10 after
  // the first poll, even on a loaded machine.
  auto first = StartEvaluator({"--poll-interval", "10", "--max-evaluations", "2"});
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForOutput("skipping ckpt-30: ", 60s)) << first->output();
  Repair(10);
  auto first_exit = first->WaitExit(60s);
  ASSERT_TRUE(first_exit.has_value()) << first->output();
  EXPECT_TRUE(first_exit->success()) << first->output();
  EXPECT_NE(first->output().find("evaluated checkpoint ckpt-20"), std::string::npos) << first->output();
  EXPECT_NE(first->output().find("evaluated checkpoint ckpt-10"), std::string::npos) << first->output();
  EXPECT_EQ(first->output().find("evaluated final checkpoint ckpt-30"), std::string::npos) << first->output();
  EXPECT_EQ(Lease()["last_evaluated_step"], 20) << Lease().dump();
  // ckpt-30 was looked at once: not counted as skipped, named as not
  // evaluated.
  EXPECT_NE(first->output().find("evaluator stopped after 2 checkpoint(s) without the final one; ckpt-30 not "
                                 "evaluated: unreadable on its only look, and --max-evaluations stopped the "
                                 "evaluator before its second"),
            std::string::npos)
      << first->output();

  // Started again, it resumes after ckpt-20 and looks at ckpt-30 twice.
  auto again = StartEvaluator({"--poll-interval", "0.2"});
  ASSERT_NE(again, nullptr);
  auto again_exit = again->WaitExit(60s);
  ASSERT_TRUE(again_exit.has_value()) << again->output();
  EXPECT_EQ(again_exit->ShellCode(), 1) << again->output();
  EXPECT_NE(again->output().find("resuming after step 20"), std::string::npos) << again->output();
  EXPECT_NE(again->output().find("the job's last checkpoint ckpt-30 could not be evaluated: "), std::string::npos)
      << again->output();
  EXPECT_EQ(again->output().find("was evaluated before"), std::string::npos) << again->output();
  EXPECT_EQ(Lease()["last_evaluated_step"], 20) << Lease().dump();
}

// No end of the job in sight (a chief started from ckpt-30 trains on): a
// checkpoint found damaged after --eval-timeout's quiet time gets its second
// look, a poll later, before the evaluator stops; repaired by then, it is
// evaluated. (It stopped at once and counted it as skipped.)
TEST_F(EvaluatorSkippedCheckpointTest, EvalTimeoutGivesACheckpointSkippedOnceItsSecondLook) {
  fs::remove(run_ / "checkpoints" / "training-done");
  std::ofstream(run_ / "checkpoints" / "training-start") << R"({"from_step": 30, "run": "0123456789abcdef", "time": 1})";
  const fs::path aside = dir_ / "ckpt-30";
  fs::rename(run_ / "checkpoints" / "ckpt-30", aside);
  auto evaluator = StartEvaluator({"--poll-interval", "5", "--eval-timeout", "3"});
  ASSERT_NE(evaluator, nullptr);
  ASSERT_TRUE(evaluator->WaitForOutput("evaluated checkpoint ckpt-20", 60s)) << evaluator->output();
  // Written damaged while the evaluator waits for its next poll, which
  // comes after the 3 s of --eval-timeout.
  fs::rename(aside, run_ / "checkpoints" / "ckpt-30");
  Damage(30);
  ASSERT_TRUE(evaluator->WaitForOutput("skipping ckpt-30: ", 60s)) << evaluator->output();
  Repair(30);
  auto exit = evaluator->WaitExit(60s);
  ASSERT_TRUE(exit.has_value()) << evaluator->output();
  EXPECT_TRUE(exit->success()) << evaluator->output();
  EXPECT_NE(evaluator->output().find("checkpoint ckpt-30 (epoch"), std::string::npos) << evaluator->output();
  EXPECT_NE(evaluator->output().find("evaluator stopped after 3 checkpoint(s); the newest, ckpt-30, final in its "
                                     "state.json"),
            std::string::npos)
      << evaluator->output();
  EXPECT_EQ(Lease()["last_evaluated_step"], 30) << Lease().dump();
}

}  // namespace
}  // namespace mirrored
