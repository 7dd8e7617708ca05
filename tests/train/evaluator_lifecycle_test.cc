// The side-car evaluator beside real jobs, from its start to its end: it
// evaluates every checkpoint exactly once, in step order, ending with the
// final one; across a job's reruns, extensions, fresh starts and resumes from
// before its progress, one eval line per checkpoint that exists; one per run
// directory; it waits for a run directory not made yet and makes nothing; a
// signal stops it with its backlog still protected. (Damaged checkpoints:
// evaluator_damaged_checkpoint_test.cc.)
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

TEST_F(CheckpointResumeTest, EvaluatorEvaluatesEveryCheckpointOnceInOrderEndingWithTheFinal) {
  std::vector<std::string> argv = Job(dir_ / "eval", {"--poll-interval", "0.1"});
  argv.insert(argv.begin() + 2, "--evaluator");
  ProcessRun run = RunProcess(argv);
  ASSERT_TRUE(run.exit && run.exit->success()) << run.output;
  std::ifstream metrics(dir_ / "eval/metrics.jsonl");
  std::vector<int64_t> steps;
  std::string line, last_checkpoint;
  std::map<int64_t, int64_t> train_epoch;  // step -> epoch of its train line
  std::vector<std::pair<int64_t, int64_t>> eval_epochs;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == "train") train_epoch[j["step"].get<int64_t>()] = j["epoch"].get<int64_t>();
    if (j["kind"] != "eval") continue;
    eval_epochs.emplace_back(j["step"].get<int64_t>(), j["epoch"].get<int64_t>());
    steps.push_back(j["step"]);
    last_checkpoint = j["checkpoint"];
    EXPECT_GT(j["accuracy"].get<double>(), 0.1);
  }
  // --keep-checkpoints 5 with 6 checkpoints: the chief keeps every
  // checkpoint the evaluator has not evaluated among the newest 2 x 5
  // (evaluator_lease.h), so however far behind the evaluator runs it sees
  // every one, once, in order.
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 20, 30, 40, 50, 60})) << run.output;
  // It ended normally: the lease records its progress and protects nothing.
  std::ifstream lease_file(dir_ / "eval/checkpoints/eval-lease");
  auto lease = nlohmann::json::parse(lease_file, nullptr, false);
  ASSERT_TRUE(lease.is_object());
  EXPECT_EQ(lease["following"], false);
  EXPECT_EQ(lease["last_evaluated_step"], 60);
  EXPECT_TRUE(lease["reading"].is_null());
  EXPECT_EQ(steps.back(), 60);
  EXPECT_EQ(last_checkpoint, "ckpt-60");
  // An eval line's epoch is its step's train line's (joinable by epoch).
  for (const auto& [step, epoch] : eval_epochs) {
    ASSERT_TRUE(train_epoch.count(step)) << "no train line for step " << step;
    EXPECT_EQ(epoch, train_epoch[step]) << "step " << step;
  }
  EXPECT_NE(run.output.find("[evaluator:0] evaluator done:"), std::string::npos) << run.output;
  std::printf("evaluated steps:");
  for (auto s : steps) std::printf(" %lld", static_cast<long long>(s));
  std::printf("\n");
}

// A finished job started again with its evaluator (a rerun, a Slurm requeue
// of a completed job) ends at once: nothing to train, and the evaluator, whose
// lease says it evaluated the final checkpoint, stops on the chief's
// training-done record instead of waiting forever. An evaluator started alone
// on the finished directory stops too; a job extended with more steps has its
// new checkpoints evaluated, up to its new final one.
TEST_F(CheckpointResumeTest, FinishedJobStartedAgainWithItsEvaluatorEndsAtOnce) {
  const fs::path run = dir_ / "rerun";
  auto job = [&](const std::string& max_steps) {
    std::vector<std::string> argv = Job(run, {}, max_steps);
    argv.insert(argv.begin() + 2, "--evaluator");
    return argv;
  };
  ProcessRun first = RunProcess(job("20"));
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  ASSERT_NE(first.output.find("evaluated final checkpoint ckpt-20"), std::string::npos) << first.output;

  // Normally at once; within 120 s even when the evaluator read the new
  // record before the old one (evaluator.cc: then it waits 60 s for a change).
  ProcessRun again = RunProcess(job("20"), "", 120s);
  ASSERT_TRUE(again.exit.has_value()) << "the rerun did not end:\n" << again.output;
  EXPECT_TRUE(again.exit->success()) << again.output;
  EXPECT_NE(again.output.find("nothing to train: the run directory's latest checkpoint is at step 20"),
            std::string::npos) << again.output;
  EXPECT_NE(again.output.find("[worker:0] done: 20 steps (nothing left to train)"), std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("[evaluator:0] evaluator done: 0 checkpoint(s); the job's last checkpoint, ckpt-20, "
                              "was evaluated before"),
            std::string::npos) << again.output;

  ProcessRun alone = RunProcess({kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"}, "",
                                60s, {R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(alone.exit.has_value()) << alone.output;
  EXPECT_TRUE(alone.exit->success()) << alone.output;
  EXPECT_NE(alone.output.find("the job's last checkpoint, ckpt-20, was evaluated before"), std::string::npos)
      << alone.output;

  // So does one that mirrored-launch starts again after training ended
  // (MIRRORED_TRAINING_ENDED=1): beside a job it would otherwise give a
  // record found at its start 60 s to change (a chief about to extend the
  // run), which the 30 s limit here would not allow.
  ProcessRun restarted =
      RunProcess({kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"}, "", 30s,
                 {R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})",
                  "MIRRORED_GENERATION=0", "MIRRORED_TRAINING_ENDED=1"});
  ASSERT_TRUE(restarted.exit.has_value()) << "the restarted evaluator did not end:\n" << restarted.output;
  EXPECT_TRUE(restarted.exit->success()) << restarted.output;
  EXPECT_NE(restarted.output.find("the job's last checkpoint, ckpt-20, was evaluated before"), std::string::npos)
      << restarted.output;

  ProcessRun extended = RunProcess(job("40"));
  ASSERT_TRUE(extended.exit && extended.exit->success()) << extended.output;
  EXPECT_NE(extended.output.find("[evaluator:0] evaluated checkpoint ckpt-30"), std::string::npos) << extended.output;
  EXPECT_NE(extended.output.find("[evaluator:0] evaluated final checkpoint ckpt-40"), std::string::npos)
      << extended.output;
}

// One evaluator per run directory: a second one (sharing the first one's
// lease, it would evaluate every checkpoint again) is refused, exit 2.
TEST_F(CheckpointResumeTest, ASecondEvaluatorOnARunDirectoryIsRefused) {
  const fs::path run = dir_ / "two-evaluators";
  fs::create_directories(run / "checkpoints");  // a job has started there
  const std::string tf_config = R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})";
  const std::vector<std::string> argv = {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"};
  auto first = testing_util::WorkerProcess::Start(argv, {"PATH=/usr/bin:/bin", tf_config});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->WaitForOutput("evaluator following", 60s)) << (*first)->output();
  ProcessRun second = RunProcess(argv, "", 60s, {tf_config});
  ASSERT_TRUE(second.exit.has_value()) << second.output;
  EXPECT_EQ(second.exit->exit_code, std::optional<int>(2)) << second.output;
  EXPECT_NE(second.output.find("already has an evaluator (pid "), std::string::npos) << second.output;
  ASSERT_EQ(kill((*first)->child().pid(), SIGTERM), 0);
  auto stopped = (*first)->WaitExit(30s);
  ASSERT_TRUE(stopped.has_value()) << (*first)->output();
  EXPECT_EQ(stopped->ShellCode(), 128 + SIGTERM) << (*first)->output();
}

// A run extended with more steps, whose earlier run had no evaluator: the old
// final checkpoint is evaluated like any other, and the evaluator goes on to
// the new run's checkpoints, ending with its final one.
TEST_F(CheckpointResumeTest, ExtendedRunsNewCheckpointsAreEvaluatedPastTheOldFinalOne) {
  const fs::path run = dir_ / "extended";
  ProcessRun first = RunProcess(Job(run, {}, "10"));
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  std::vector<std::string> argv = Job(run, {}, "30");
  argv.insert(argv.begin() + 2, "--evaluator");
  ProcessRun extended = RunProcess(argv);
  ASSERT_TRUE(extended.exit && extended.exit->success()) << extended.output;
  // ckpt-10 is "final" only if the evaluator got to it before ckpt-20 was written.
  EXPECT_NE(extended.output.find("checkpoint ckpt-10 (epoch 1)"), std::string::npos) << extended.output;
  EXPECT_NE(extended.output.find("[evaluator:0] evaluated checkpoint ckpt-20"), std::string::npos) << extended.output;
  EXPECT_NE(extended.output.find("[evaluator:0] evaluator done: 3 checkpoint(s); final checkpoint ckpt-30"),
            std::string::npos)
      << extended.output;

  // An evaluator started afresh on the finished run (its lease removed) sees
  // all three at once: only the run's last one is called final.
  fs::remove(run / "checkpoints" / "eval-lease");
  ProcessRun fresh = RunProcess({kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"}, "",
                                60s, {R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(fresh.exit && fresh.exit->success()) << fresh.output;
  EXPECT_NE(fresh.output.find("evaluated checkpoint ckpt-10 (epoch 1)"), std::string::npos) << fresh.output;
  EXPECT_EQ(fresh.output.find("evaluated final checkpoint ckpt-10"), std::string::npos) << fresh.output;
  EXPECT_NE(fresh.output.find("evaluated final checkpoint ckpt-30"), std::string::npos) << fresh.output;
}

// A job started afresh on a run directory whose checkpoints were deleted
// (metrics.jsonl and the evaluator's lease kept): the old run's eval lines
// go with its checkpoints, and the evaluator, whose lease is ahead of every
// new checkpoint, evaluates the new run's. An evaluator that died between its
// metrics line and its lease update does not write the line twice.
TEST_F(CheckpointResumeTest, AFreshStartDropsTheOldEvalLinesAndEachCheckpointHasOneLine) {
  const fs::path run = dir_ / "afresh";
  auto job = [&](const std::string& max_steps) {
    std::vector<std::string> argv = Job(run, {"--poll-interval", "0.1"}, max_steps);
    argv.insert(argv.begin() + 2, "--evaluator");
    return argv;
  };
  ProcessRun first = RunProcess(job("20"));
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  ASSERT_EQ(EvalLines(run), (std::vector<std::pair<int64_t, std::string>>{{10, "ckpt-10"}, {20, "ckpt-20"}}));
  for (const auto& e : fs::directory_iterator(run / "checkpoints"))
    if (e.path().filename() != "eval-lease") fs::remove_all(e.path());

  ProcessRun second = RunProcess(job("10"));
  ASSERT_TRUE(second.exit && second.exit->success()) << second.output;
  EXPECT_NE(second.output.find("the job started again from step 0, behind ckpt-20 evaluated before"),
            std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("[evaluator:0] evaluated final checkpoint ckpt-10"), std::string::npos)
      << second.output;
  EXPECT_EQ(EvalLines(run), (std::vector<std::pair<int64_t, std::string>>{{10, "ckpt-10"}})) << second.output;

  // The lease as an evaluator killed after its line for ckpt-10 left it.
  std::ofstream(run / "checkpoints" / "eval-lease", std::ios::trunc)
      << R"({"reading":"ckpt-10","last_evaluated_step":null,"following":true})";
  ProcessRun again = RunProcess({kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"}, "",
                                60s, {R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(again.exit && again.exit->success()) << again.output;
  EXPECT_NE(again.output.find("metrics.jsonl already has ckpt-10's eval line"), std::string::npos) << again.output;
  EXPECT_EQ(EvalLines(run), (std::vector<std::pair<int64_t, std::string>>{{10, "ckpt-10"}})) << again.output;
}

// The latest checkpoint, evaluated, then damaged: the job resumes from the
// one before and writes that step's checkpoint anew. Its old eval line goes
// with it, and the evaluator, whose lease is past the resume step, evaluates
// the new one: one line per checkpoint, of the checkpoint that exists.
TEST_F(CheckpointResumeTest, AResumeFromBeforeTheEvaluatorsProgressHasItsNewCheckpointsEvaluated) {
  const fs::path run = dir_ / "went-back";
  auto job = [&] {
    std::vector<std::string> argv = Job(run, {"--poll-interval", "0.1"}, "20");
    argv.insert(argv.begin() + 2, "--evaluator");
    return argv;
  };
  ProcessRun first = RunProcess(job());
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  ASSERT_EQ(EvalLines(run).size(), 2u) << first.output;
  {
    std::fstream f(run / "checkpoints" / "ckpt-20" / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    const char bad[8] = {'\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a', '\x5a'};
    f.write(bad, sizeof(bad));
  }
  ProcessRun again = RunProcess(job());
  ASSERT_TRUE(again.exit && again.exit->success()) << again.output;
  EXPECT_NE(again.output.find("checkpoints/ckpt-10 (step 10"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("the job started again from step 10, behind ckpt-20 evaluated before"),
            std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("[evaluator:0] evaluated final checkpoint ckpt-20"), std::string::npos) << again.output;
  EXPECT_EQ(EvalLines(run), (std::vector<std::pair<int64_t, std::string>>{{10, "ckpt-10"}, {20, "ckpt-20"}}))
      << again.output;
}

// An evaluator alone on a run directory no job has made yet waits for its
// checkpoints directory without making anything (a mistyped --run-dir leaves
// no run directory behind), ends on --eval-timeout; a path that is a file,
// or lies under one, is exit 2 at once.
TEST_F(CheckpointResumeTest, AnEvaluatorOnAMissingRunDirectoryMakesNothing) {
  const fs::path run = dir_ / "not-yet";
  const std::string tf_config = R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})";
  ProcessRun waited = RunProcess(
      {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.1", "--eval-timeout", "0.5"}, "",
      30s, {tf_config});
  ASSERT_TRUE(waited.exit.has_value()) << waited.output;
  EXPECT_TRUE(waited.exit->success()) << waited.output;
  EXPECT_NE(waited.output.find("does not exist yet: waiting for the job's chief"), std::string::npos) << waited.output;
  EXPECT_FALSE(fs::exists(run)) << "the evaluator made " << run;
  fs::create_directories(dir_);
  std::ofstream(dir_ / "a-file") << "x";
  ProcessRun file = RunProcess({kBin + "/mirrored-worker", "--run-dir", (dir_ / "a-file").string()}, "", 30s,
                               {tf_config});
  ASSERT_TRUE(file.exit.has_value()) << file.output;
  EXPECT_EQ(file.exit->exit_code, std::optional<int>(2)) << file.output;
  EXPECT_NE(file.output.find("a-file is not a directory"), std::string::npos) << file.output;
  // Under a file: stat(2) says ENOTDIR, which std::filesystem::exists takes
  // for "not there yet" (the evaluator waited for --eval-timeout, or for ever).
  ProcessRun under = RunProcess({kBin + "/mirrored-worker", "--run-dir", (dir_ / "a-file" / "sub").string(),
                                 "--poll-interval", "0.1", "--eval-timeout", "10"},
                                "", 30s, {tf_config});
  ASSERT_TRUE(under.exit.has_value()) << under.output;
  EXPECT_EQ(under.exit->exit_code, std::optional<int>(2)) << under.output;
  EXPECT_NE(under.output.find("--run-dir " + (dir_ / "a-file" / "sub").string() + ": " + (dir_ / "a-file").string() +
                              " is not a directory"),
            std::string::npos)
      << under.output;
}

// Ctrl-C or the launcher's SIGTERM (stopping or restarting the job) stops
// a following evaluator between checkpoints: it exits 128 + signal and
// keeps following in its lease, so that the chief goes on keeping the
// checkpoints it has not evaluated for the evaluator started again. (It
// ended its lease: the chief's next checkpoint pruned the backlog, and the
// evaluator started again never saw those checkpoints.)
TEST_F(CheckpointResumeTest, SignalledEvaluatorStopsAndKeepsItsBacklogProtected) {
  const fs::path run = dir_ / "eval-signal";
  fs::create_directories(run / "checkpoints");  // a job has started there
  auto evaluator = testing_util::WorkerProcess::Start(
      {kBin + "/mirrored-worker", "--run-dir", run.string(), "--poll-interval", "0.2"},
      {"PATH=/usr/bin:/bin",
       R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  ASSERT_TRUE((*evaluator)->WaitForOutput("evaluator following", 30s)) << (*evaluator)->output();
  auto lease = [&] {
    std::ifstream in(run / "checkpoints/eval-lease");
    return nlohmann::json::parse(in, nullptr, false);
  };
  EXPECT_EQ(lease()["following"], true);
  ASSERT_EQ(kill((*evaluator)->child().pid(), SIGTERM), 0);
  auto exit = (*evaluator)->WaitExit(10s);
  ASSERT_TRUE(exit.has_value()) << "the evaluator did not stop within 10 s of SIGTERM";
  EXPECT_EQ(exit->ShellCode(), 143) << (*evaluator)->output();
  EXPECT_FALSE(exit->signal.has_value()) << "killed by the signal instead of stopping";
  EXPECT_NE((*evaluator)->output().find("evaluator stopped by SIGTERM (15) after 0 checkpoint(s)"), std::string::npos)
      << (*evaluator)->output();
  EXPECT_EQ(lease()["following"], true);
  EXPECT_TRUE(lease()["reading"].is_null());
}

}  // namespace
}  // namespace mirrored
