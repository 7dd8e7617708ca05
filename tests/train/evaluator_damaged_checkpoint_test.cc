// The side-car evaluator on run directories whose checkpoints or records are
// damaged (truncated or overwritten files, a training-done record missing or
// cut short, a copy cut short): each damaged checkpoint is skipped after its
// second look and counted; the job's last one damaged is exit 1 naming it, not
// a wait for ever; one whole again on its second look is evaluated. A real
// mirrored-worker trains the checkpoints. (Skips and the lease:
// evaluator_skipped_checkpoint_test.cc.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

// A run directory copied without its training-done record, or with a
// damaged one: an evaluator on its own stops after the checkpoint its
// state.json marks final (evaluated now, or before, as its lease says),
// instead of waiting for ever after announcing the final checkpoint; but not
// while a chief that started from that checkpoint trains on.
TEST_F(CheckpointResumeTest, AnEvaluatorAloneStopsAtTheFinalMarkWithoutATrainingDoneRecord) {
  const fs::path run = dir_ / "copied";
  ProcessRun first = RunProcess(Job(run, {}, "20"));
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  const std::vector<std::string> evaluator = {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval",
                                              "0.1"};
  const std::vector<std::string> env = {
      R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"};
  fs::remove(run / "checkpoints" / "training-done");
  ProcessRun missing = RunProcess(evaluator, "", 60s, env);
  ASSERT_TRUE(missing.exit.has_value()) << "the evaluator did not stop:\n" << missing.output;
  EXPECT_TRUE(missing.exit->success()) << missing.output;
  EXPECT_NE(missing.output.find("evaluator done: 2 checkpoint(s); final checkpoint ckpt-20"), std::string::npos)
      << missing.output;

  std::ofstream(run / "checkpoints" / "training-done") << R"({"checkpoint":)";
  ProcessRun damaged = RunProcess(evaluator, "", 60s, env);
  ASSERT_TRUE(damaged.exit.has_value()) << "the evaluator did not stop:\n" << damaged.output;
  EXPECT_TRUE(damaged.exit->success()) << damaged.output;
  EXPECT_NE(damaged.output.find("cannot read the job's training-done record"), std::string::npos) << damaged.output;
  EXPECT_NE(damaged.output.find("the job's last checkpoint, ckpt-20, was evaluated before"), std::string::npos)
      << damaged.output;

  // A newer checkpoint directory whose state.json cannot be read (a copy
  // cut short) does not hide the mark: a chief would resume from ckpt-20
  // too. It is skipped (after its second look) and the evaluator stops; it
  // waited for ever.
  fs::remove(run / "checkpoints" / "training-done");
  fs::create_directories(run / "checkpoints" / "ckpt-30");
  fs::copy_file(run / "checkpoints" / "ckpt-20" / "model.safetensors",
                run / "checkpoints" / "ckpt-30" / "model.safetensors");
  std::vector<std::string> bounded = evaluator;
  bounded.insert(bounded.end(), {"--eval-timeout", "10"});
  ProcessRun partial = RunProcess(bounded, "", 60s, env);
  ASSERT_TRUE(partial.exit.has_value()) << partial.output;
  EXPECT_TRUE(partial.exit->success()) << partial.output;
  EXPECT_NE(partial.output.find("skipping ckpt-30: "), std::string::npos) << partial.output;
  EXPECT_NE(partial.output.find("evaluator done: 0 checkpoint(s) (1 more skipped: removed or damaged before they "
                                "could be evaluated); the job's last checkpoint, ckpt-20, was evaluated before"),
            std::string::npos)
      << partial.output;
  fs::remove_all(run / "checkpoints" / "ckpt-30");

  // A chief started from ckpt-20 since (its training-start record) trains
  // on: the mark is no longer the end, and the evaluator waits (here until
  // --eval-timeout).
  fs::remove(run / "checkpoints" / "training-done");
  std::ofstream(run / "checkpoints" / "training-start") << R"({"from_step": 20, "run": "0123456789abcdef", "time": 1})";
  std::vector<std::string> timed = evaluator;
  timed.insert(timed.end(), {"--eval-timeout", "1"});
  ProcessRun trained_on = RunProcess(timed, "", 60s, env);
  ASSERT_TRUE(trained_on.exit.has_value()) << trained_on.output;
  // What is true: ckpt-20, marked final, was evaluated before (it said
  // "without the final one").
  EXPECT_NE(trained_on.output.find("evaluator stopped after 0 checkpoint(s); ckpt-20, final in its state.json, was "
                                   "evaluated before (recorded in the evaluator lease)"),
            std::string::npos)
      << trained_on.output;
}

// Damaged checkpoints as the evaluator lists them (a truncated file, found
// by its size against state.json's record): each is skipped once, counted
// in the last line; a damaged optimizer file is no obstacle; the job's last
// model damaged ends the evaluator with an error naming it (exit 1), not a
// wait for ever.
TEST_F(CheckpointResumeTest, AnEvaluatorCountsTruncatedCheckpointsAndFailsOnATruncatedFinalOne) {
  const fs::path run = dir_ / "truncated";
  ProcessRun first = RunProcess(Job(run, {}, "30"));
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  const std::vector<std::string> evaluator = {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval",
                                              "0.1"};
  const std::vector<std::string> env = {
      R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"};
  fs::resize_file(run / "checkpoints" / "ckpt-20" / "model.safetensors", 1000);
  ProcessRun middle = RunProcess(evaluator, "", 60s, env);
  ASSERT_TRUE(middle.exit.has_value()) << middle.output;
  EXPECT_TRUE(middle.exit->success()) << middle.output;
  EXPECT_NE(middle.output.find("skipping ckpt-20: DATA_LOSS: " + (run / "checkpoints" / "ckpt-20").string() +
                               "/model.safetensors is damaged: 1000 bytes; written as "),
            std::string::npos)
      << middle.output;
  EXPECT_NE(middle.output.find("evaluator done: 2 checkpoint(s) (1 more skipped: "), std::string::npos)
      << middle.output;

  // The evaluator needs only the weights: a damaged optimizer file (which
  // the chief could not resume from) does not keep it from them.
  fs::remove(run / "checkpoints" / "eval-lease");
  fs::resize_file(run / "checkpoints" / "ckpt-30" / "optimizer.safetensors", 1000);
  ProcessRun optimizer = RunProcess(evaluator, "", 60s, env);
  ASSERT_TRUE(optimizer.exit.has_value()) << optimizer.output;
  EXPECT_TRUE(optimizer.exit->success()) << optimizer.output;
  EXPECT_NE(optimizer.output.find("evaluated final checkpoint ckpt-30"), std::string::npos) << optimizer.output;

  fs::remove(run / "checkpoints" / "eval-lease");
  fs::resize_file(run / "checkpoints" / "ckpt-30" / "model.safetensors", 1000);
  ProcessRun last = RunProcess(evaluator, "", 60s, env);
  ASSERT_TRUE(last.exit.has_value()) << "the evaluator did not stop:\n" << last.output;
  EXPECT_EQ(last.exit->exit_code, kExitFailure) << last.output;
  EXPECT_NE(last.output.find("the job's last checkpoint ckpt-30 could not be evaluated: "), std::string::npos)
      << last.output;

  // The same without the training-done record: the damaged checkpoint's own
  // state.json says it is the final one.
  fs::remove(run / "checkpoints" / "eval-lease");
  fs::remove(run / "checkpoints" / "training-done");
  ProcessRun unmarked = RunProcess(evaluator, "", 60s, env);
  ASSERT_TRUE(unmarked.exit.has_value()) << "the evaluator did not stop:\n" << unmarked.output;
  EXPECT_EQ(unmarked.exit->exit_code, kExitFailure) << unmarked.output;
  EXPECT_NE(unmarked.output.find("the job's last checkpoint ckpt-30 could not be evaluated: "), std::string::npos)
      << unmarked.output;
}

// The job's final checkpoint damaged after it was written (its CRC-32C no
// longer matches): the evaluator does not claim it evaluated it; exit 1,
// naming the file, once a second look a poll later finds it damaged still.
// Whole again on that look (a checkpoint being replaced, by a chief redoing
// its step, can be caught mid-way), it is evaluated.
TEST_F(CheckpointResumeTest, EvaluatorWhoseFinalCheckpointIsDamagedSaysSo) {
  const fs::path run = dir_ / "damaged";
  ProcessRun trained = RunProcess({kBin + "/mirrored-worker", "--model", "mlp", "--max-steps", "20",
                                   "--checkpoint-every", "10", "--no-validate", "--cpu-replicas", "1", "--run-dir",
                                   run.string()});
  ASSERT_TRUE(trained.exit && trained.exit->success()) << trained.output;
  const fs::path model = run / "checkpoints" / "ckpt-20" / "model.safetensors";
  char good[8] = {};
  {
    std::ifstream f(model, std::ios::binary);
    f.seekg(-100, std::ios::end);
    f.read(good, sizeof(good));
  }
  const char bad[8] = {'\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a'};
  auto overwrite = [&](const char* bytes) {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.write(bytes, 8);
  };
  const std::string tf_config = R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})";

  // Repaired between the two looks, 10 s apart: far longer than the test
  // takes to react to the first, even on a loaded machine.
  overwrite(bad);
  auto repaired = testing_util::WorkerProcess::Start(
      {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "10"}, {"PATH=/usr/bin:/bin", tf_config});
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  ASSERT_TRUE((*repaired)->WaitForOutput("skipping ckpt-20: ", 60s)) << (*repaired)->output();
  overwrite(good);
  auto repaired_exit = (*repaired)->WaitExit(60s);
  ASSERT_TRUE(repaired_exit.has_value()) << (*repaired)->output();
  EXPECT_TRUE(repaired_exit->success()) << (*repaired)->output();
  EXPECT_NE((*repaired)->output().find("evaluated final checkpoint ckpt-20"), std::string::npos)
      << (*repaired)->output();
  EXPECT_NE((*repaired)->output().find("evaluator done: 2 checkpoint(s); final checkpoint ckpt-20"),
            std::string::npos)
      << (*repaired)->output();

  // Damaged on both looks.
  overwrite(bad);
  fs::remove(run / "checkpoints" / "eval-lease");
  ProcessRun eval = RunProcess({kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"}, "",
                               60s, {tf_config});
  ASSERT_TRUE(eval.exit.has_value()) << eval.output;
  EXPECT_EQ(eval.exit->ShellCode(), 1) << eval.output;
  EXPECT_NE(eval.output.find("evaluated checkpoint ckpt-10"), std::string::npos) << eval.output;
  EXPECT_NE(eval.output.find("skipping ckpt-20 (again on a second look): "), std::string::npos) << eval.output;
  EXPECT_NE(eval.output.find("the job's last checkpoint ckpt-20 could not be evaluated: "), std::string::npos)
      << eval.output;
  EXPECT_NE(eval.output.find("model.safetensors is damaged"), std::string::npos) << eval.output;
}

// The job's last checkpoint evaluated while an older one, found damaged,
// awaits its second look: the evaluator polls once more before it stops
// (it stopped at once and counted the older one as skipped). Damaged still,
// it is skipped; whole again (a checkpoint being replaced, caught mid-way),
// it is evaluated after the final one, and the last line still names the
// final one's result.
TEST_F(CheckpointResumeTest, AnOlderCheckpointSkippedOnceGetsItsSecondLookBeforeTheEvaluatorStops) {
  const fs::path run = dir_ / "second-look";
  ProcessRun trained = RunProcess({kBin + "/mirrored-worker", "--model", "mlp", "--max-steps", "20",
                                   "--checkpoint-every", "10", "--no-validate", "--cpu-replicas", "1", "--run-dir",
                                   run.string()});
  ASSERT_TRUE(trained.exit && trained.exit->success()) << trained.output;
  const fs::path model = run / "checkpoints" / "ckpt-10" / "model.safetensors";
  char good[8] = {};
  {
    std::ifstream f(model, std::ios::binary);
    f.seekg(-100, std::ios::end);
    f.read(good, sizeof(good));
  }
  const char bad[8] = {'\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a'};
  auto overwrite = [&](const char* bytes) {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.write(bytes, 8);
  };
  const std::string tf_config = R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})";

  overwrite(bad);
  ProcessRun damaged = RunProcess({kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"}, "",
                                  60s, {tf_config});
  ASSERT_TRUE(damaged.exit.has_value()) << damaged.output;
  EXPECT_TRUE(damaged.exit->success()) << damaged.output;
  EXPECT_NE(damaged.output.find("evaluated final checkpoint ckpt-20"), std::string::npos) << damaged.output;
  EXPECT_NE(damaged.output.find("skipping ckpt-10 (again on a second look): "), std::string::npos) << damaged.output;
  EXPECT_NE(damaged.output.find("evaluator done: 1 checkpoint(s) (1 more skipped: removed or damaged before they "
                                "could be evaluated); final checkpoint ckpt-20: loss "),
            std::string::npos)
      << damaged.output;

  // Repaired between the two looks, 10 s apart: far longer than the test
  // takes to react to the first, even on a loaded machine.
  fs::remove(run / "checkpoints" / "eval-lease");
  auto repaired = testing_util::WorkerProcess::Start(
      {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "10"}, {"PATH=/usr/bin:/bin", tf_config});
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  ASSERT_TRUE((*repaired)->WaitForOutput("skipping ckpt-10: ", 60s)) << (*repaired)->output();
  overwrite(good);
  auto repaired_exit = (*repaired)->WaitExit(60s);
  ASSERT_TRUE(repaired_exit.has_value()) << (*repaired)->output();
  EXPECT_TRUE(repaired_exit->success()) << (*repaired)->output();
  const std::string out = (*repaired)->output();
  const size_t final_line = out.find("evaluated final checkpoint ckpt-20");
  ASSERT_NE(final_line, std::string::npos) << out;
  EXPECT_NE(out.find("evaluated checkpoint ckpt-10", final_line), std::string::npos) << out;
  // The newest step's result, not the last evaluated one's (it said "the
  // job's last checkpoint, ckpt-20, was evaluated before").
  std::smatch final_result;
  ASSERT_TRUE(std::regex_search(out, final_result, std::regex("evaluated final checkpoint ckpt-20 \\(epoch [0-9]+\\): "
                                                               "(loss [0-9.]+ accuracy [0-9.]+)")))
      << out;
  EXPECT_NE(out.find("evaluator done: 2 checkpoint(s); final checkpoint ckpt-20: " + final_result[1].str()),
            std::string::npos)
      << out;
  EXPECT_EQ(EvalLines(run), (std::vector<std::pair<int64_t, std::string>>{{20, "ckpt-20"}, {10, "ckpt-10"}})) << out;
}

}  // namespace
}  // namespace mirrored
