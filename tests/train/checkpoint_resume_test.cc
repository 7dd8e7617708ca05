// Checkpoints in a real job: a job killed (SIGKILL) at a random step and
// started again on the same run directory finishes with the same weights, bit
// for bit, as one that ran uninterrupted; and the side-car evaluator
// evaluates every checkpoint exactly once, in step order, ending with the
// final one.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "launcher/process/child_process.h"
#include "tests/util/worker_process.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBin = MIRRORED_BIN_DIR;

struct ProcessRun {
  std::optional<ProcessExit> exit;
  std::string output;
};

// Runs argv; when `kill_after` is given, SIGKILLs the process group as soon
// as that text appears in its output.
ProcessRun RunProcess(const std::vector<std::string>& argv, const std::string& kill_after = "",
                      std::chrono::seconds timeout = 180s, std::vector<std::string> env = {}) {
  ProcessRun run;
  env.push_back("PATH=/usr/bin:/bin");
  auto process = testing_util::WorkerProcess::Start(argv, env);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return run;
  const auto deadline = Clock::now() + timeout;
  if (!kill_after.empty() && (*process)->WaitForOutput(kill_after, timeout)) (*process)->child().SignalGroup(SIGKILL);
  run.exit = (*process)->WaitExit(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  run.output = (*process)->output();
  return run;
}

// The pid of the process whose command line mentions `run_dir` and whose
// TF_CONFIG names task index `index` (a worker started by the launcher).
pid_t FindWorker(const fs::path& run_dir, int index) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(entry.path() / "cmdline"), env(entry.path() / "environ");
    std::string cmdline((std::istreambuf_iterator<char>(cmd)), {}), environ((std::istreambuf_iterator<char>(env)), {});
    if (cmdline.find("mirrored-worker") != std::string::npos && cmdline.find(run_dir.string()) != std::string::npos &&
        (environ.find("\"index\":" + std::to_string(index) + "}") != std::string::npos ||
         environ.find("\"index\":" + std::to_string(index) + ",") != std::string::npos)) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

std::string Fingerprint(const std::string& output) {
  std::smatch m;
  static const std::regex kFp("worker:0\\] done: .*weights fingerprint ([0-9a-f]{6})");
  return std::regex_search(output, m, kFp) ? m[1].str() : "";
}

class CheckpointResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-resume-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Job(const fs::path& run, std::vector<std::string> extra = {},
                               const std::string& max_steps = "60") {
    std::vector<std::string> argv = {kBin + "/mirrored-launch", "local", "--workers", "2", "--cpu-replicas", "2",
                                     "--run-dir", run.string(), "--", "--max-steps", max_steps};
    for (auto a : {"--model", "mlp", "--checkpoint-every", "10", "--log-every", "1", "--no-validate"})
      argv.push_back(a);
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  fs::path dir_;
};

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

// The eval lines of metrics.jsonl, as (step, checkpoint).
std::vector<std::pair<int64_t, std::string>> EvalLines(const fs::path& run) {
  std::vector<std::pair<int64_t, std::string>> lines;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j["kind"] == "eval") lines.emplace_back(j["step"].get<int64_t>(), j["checkpoint"]);
  }
  return lines;
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
