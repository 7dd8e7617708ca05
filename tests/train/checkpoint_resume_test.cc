// Checkpoints in a real job, on the training side: a job killed (SIGKILL) at a
// random step, or preempted (SIGTERM to a worker), and started again on the
// same run directory finishes with the same weights, bit for bit, as one that
// ran uninterrupted; a diverged job checkpoints nothing past its last good
// step; a resume with another optimizer is a configuration error; a
// validation lost to a crash is run on resume. (The evaluator beside such
// jobs: evaluator_lifecycle_test.cc, evaluator_damaged_checkpoint_test.cc.)
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <regex>
#include <thread>
#include <tuple>

#include "tests/train/checkpoint_resume_test_util.h"

namespace mirrored {
namespace {

TEST_F(CheckpointResumeTest, KilledAndResumedJobEndsBitIdenticalToAnUninterruptedOne) {
  ProcessRun straight = RunProcess(Job(dir_ / "straight"));
  ASSERT_TRUE(straight.exit && straight.exit->success()) << straight.output;
  const std::string want = Fingerprint(straight.output);
  ASSERT_FALSE(want.empty()) << straight.output;

  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  const int kill_step = std::uniform_int_distribution<int>(12, 55)(rng);
  ProcessRun killed = RunProcess(Job(dir_ / "resumed"), "step " + std::to_string(kill_step) + "/60");
  ASSERT_TRUE(killed.exit.has_value());
  EXPECT_FALSE(killed.exit->success()) << "the job finished before the kill at step " << kill_step;
  ProcessRun resumed = RunProcess(Job(dir_ / "resumed"));
  ASSERT_TRUE(resumed.exit && resumed.exit->success()) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  EXPECT_EQ(Fingerprint(resumed.output), want) << "killed at step " << kill_step << "\n" << resumed.output;
  std::printf("killed at step %d, resumed: fingerprint %s (uninterrupted %s)\n", kill_step,
              Fingerprint(resumed.output).c_str(), want.c_str());
}

// A job that diverges (loss NaN: here a resumed job given an absurd learning
// rate) stops on every task at the same step with exit 2, naming the steps and
// the checkpoint to go back to, and never checkpoints the broken weights: the
// good checkpoint stays the latest, and a run with a sane rate resumes from it.
TEST_F(CheckpointResumeTest, DivergedJobStopsWithoutCheckpointingAndResumesFromTheLastGoodOne) {
  const fs::path run = dir_ / "diverged";
  ProcessRun good = RunProcess(Job(run, {"--optimizer", "sgd", "--lr", "0.05"}, "20"));
  ASSERT_TRUE(good.exit && good.exit->success()) << good.output;
  ASSERT_TRUE(fs::exists(run / "checkpoints" / "ckpt-20"));

  ProcessRun diverged = RunProcess(Job(run, {"--optimizer", "sgd", "--lr", "1e9"}));
  ASSERT_TRUE(diverged.exit.has_value()) << diverged.output;
  EXPECT_EQ(diverged.exit->ShellCode(), 2) << diverged.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(diverged.output, m,
                                std::regex("training diverged: the mean loss over steps? ([0-9]+)(-[0-9]+)? is (nan|inf)")))
      << diverged.output;
  EXPECT_GT(std::stoi(m[1].str()), 20) << diverged.output;
  EXPECT_NE(diverged.output.find("The latest checkpoint, ckpt-20, is from before"), std::string::npos)
      << diverged.output;
  EXPECT_NE(diverged.output.find("Try a lower --lr (now 1e+09, sgd)"), std::string::npos) << diverged.output;
  for (const auto& entry : fs::directory_iterator(run / "checkpoints")) {
    const std::string name = entry.path().filename();
    if (!name.starts_with("ckpt-")) continue;
    EXPECT_TRUE(name == "ckpt-10" || name == "ckpt-20") << "a checkpoint after the divergence: " << entry.path();
  }
  nlohmann::json index = nlohmann::json::parse(std::ifstream(run / "checkpoints" / "checkpoint"));
  EXPECT_EQ(index.value("latest", ""), "ckpt-20") << index.dump();

  ProcessRun resumed = RunProcess(Job(run, {"--optimizer", "sgd", "--lr", "0.05"}));
  ASSERT_TRUE(resumed.exit && resumed.exit->success()) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("(step 20,"), std::string::npos) << resumed.output;
  std::printf("diverged over steps %s%s, resumed from ckpt-20 and finished\n", m[1].str().c_str(), m[2].str().c_str());
}

// Resuming with another optimizer cannot restore its slots: exit 2 naming
// both, before any step (not an internal error about a missing tensor that a
// launcher would retry).
TEST_F(CheckpointResumeTest, ResumeWithAnotherOptimizerIsAConfigurationError) {
  const fs::path run = dir_ / "optimizer";
  ProcessRun adam = RunProcess({kBin + "/mirrored-worker", "--model", "mlp", "--max-steps", "10", "--no-validate",
                                "--cpu-replicas", "1", "--run-dir", run.string()});
  ASSERT_TRUE(adam.exit && adam.exit->success()) << adam.output;
  ProcessRun sgd = RunProcess({kBin + "/mirrored-worker", "--model", "mlp", "--max-steps", "20", "--no-validate",
                               "--cpu-replicas", "1", "--optimizer", "sgd", "--run-dir", run.string()});
  ASSERT_TRUE(sgd.exit.has_value()) << sgd.output;
  EXPECT_EQ(sgd.exit->ShellCode(), 2) << sgd.output;
  EXPECT_NE(sgd.output.find("--optimizer sgd does not match the run directory's checkpoint"), std::string::npos)
      << sgd.output;
  EXPECT_NE(sgd.output.find("use --optimizer adam to resume it"), std::string::npos) << sgd.output;
}

// SIGTERM to a non-chief worker mid-epoch: the tasks agree on a step, the
// chief checkpoints it, every task exits 143; started again, the job resumes
// there and ends exactly as an uninterrupted run.
TEST_F(CheckpointResumeTest, PreemptedWorkerStopsTheJobAtACheckpointedStepAndNothingIsLost) {
  ProcessRun straight = RunProcess(Job(dir_ / "straight"));
  ASSERT_TRUE(straight.exit && straight.exit->success()) << straight.output;

  const fs::path run = dir_ / "preempted";
  auto launcher = ChildProcess::Spawn(Job(run), {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  std::string out;
  char buf[4096];
  bool signalled = false;
  auto deadline = Clock::now() + 120s;
  while (Clock::now() < deadline) {
    ssize_t n = read(launcher->output_fd(), buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (!signalled && out.find("step 15/60") != std::string::npos) {
        pid_t w1 = FindWorker(run, 1);
        ASSERT_GT(w1, 0) << "worker:1 not found";
        kill(w1, SIGTERM);
        signalled = true;
      }
      continue;
    }
    if (n == 0) break;
    std::this_thread::sleep_for(5ms);
  }
  auto exit = launcher->WaitFor(10s);
  ASSERT_TRUE(signalled) << out;
  ASSERT_TRUE(exit.has_value()) << out;
  EXPECT_EQ(exit->ShellCode(), 143) << out;
  // Both name the task the SIGTERM reached.
  EXPECT_NE(out.find("[worker:0] preempted (SIGTERM first seen by worker:1): stopped after step"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker:1] preempted (SIGTERM first seen by worker:1): stopped after step"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("worker:0\\] preempted \\(SIGTERM first seen by worker:1\\): stopped after step ([0-9]+)")))
      << out;
  const std::string step = m[1].str();
  EXPECT_TRUE(fs::exists(run / "checkpoints" / ("ckpt-" + step))) << "no checkpoint at step " << step;
  EXPECT_LT(std::stoi(step), 60);

  ProcessRun resumed = RunProcess(Job(run));
  ASSERT_TRUE(resumed.exit && resumed.exit->success()) << resumed.output;
  EXPECT_NE(resumed.output.find("ckpt-" + step + " (step " + step), std::string::npos) << resumed.output;
  EXPECT_EQ(Fingerprint(resumed.output), Fingerprint(straight.output)) << resumed.output;
  std::printf("preempted at step %s, resumed: fingerprint %s (uninterrupted %s)\n", step.c_str(),
              Fingerprint(resumed.output).c_str(), Fingerprint(straight.output).c_str());
}

// A job that died between its epoch-end (or last) checkpoint and that
// step's validation: the resumed job validates that checkpoint first, once,
// so no epoch's validation is lost.
TEST_F(CheckpointResumeTest, ValidationLostToACrashAfterItsCheckpointIsRunOnResume) {
  const fs::path run = dir_ / "validate";
  const std::vector<std::string> argv = {kBin + "/mirrored-launch", "local", "--workers", "2", "--cpu-replicas", "1",
                                         "--run-dir", run.string(), "--", "--model", "mlp", "--max-steps", "30",
                                         "--checkpoint-every", "10"};
  ProcessRun first = RunProcess(argv);
  ASSERT_TRUE(first.exit && first.exit->success()) << first.output;
  auto validation_lines = [&] {
    std::vector<std::string> out;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);)
      if (line.find("\"kind\":\"validation\"") != std::string::npos) out.push_back(line);
    return out;
  };
  ASSERT_EQ(validation_lines().size(), 1u);
  const std::string original = validation_lines()[0];
  {  // as if the chief died right after writing ckpt-30
    std::ifstream in(run / "metrics.jsonl");
    std::string kept;
    for (std::string line; std::getline(in, line);)
      if (line.find("\"kind\":\"validation\"") == std::string::npos) kept += line + "\n";
    in.close();
    std::ofstream(run / "metrics.jsonl", std::ios::trunc) << kept;
  }
  ProcessRun again = RunProcess(argv);
  ASSERT_TRUE(again.exit && again.exit->success()) << again.output;
  EXPECT_NE(again.output.find("validating ckpt-30 first"), std::string::npos) << again.output;
  auto lines = validation_lines();
  ASSERT_EQ(lines.size(), 1u);
  // The same weights, the same test set: the same figures as the lost line.
  auto figures = [](const std::string& line) {
    auto j = nlohmann::json::parse(line);
    return std::make_tuple(j["step"].get<int64_t>(), j["epoch"].get<int64_t>(), j["loss"].get<double>(),
                           j["accuracy"].get<double>());
  };
  EXPECT_EQ(figures(lines[0]), figures(original)) << lines[0] << " vs " << original;

  ProcessRun third = RunProcess(argv);  // recorded now: not again
  ASSERT_TRUE(third.exit && third.exit->success()) << third.output;
  EXPECT_EQ(third.output.find("validating ckpt-30 first"), std::string::npos) << third.output;
  EXPECT_EQ(validation_lines().size(), 1u);
}

}  // namespace
}  // namespace mirrored
