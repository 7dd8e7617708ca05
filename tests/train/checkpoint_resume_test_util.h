// What the checkpoint tests with real jobs share (checkpoint_resume_test.cc,
// evaluator_lifecycle_test.cc, evaluator_damaged_checkpoint_test.cc): a
// process run to its end or SIGKILLed at a line of its output, the launcher's
// command for a small job on a scratch run directory, a worker found by its
// task index, the chief's weights fingerprint, the eval lines of metrics.jsonl.
//
//   ProcessRun run = RunProcess(Job(dir_ / "run"), "step 15/60");  // killed there
//   EXPECT_EQ(Fingerprint(resumed.output), Fingerprint(straight.output));
//   EXPECT_EQ(EvalLines(run_dir).back().second, "ckpt-60");
#pragma once

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "launcher/process/child_process.h"
#include "tests/util/worker_process.h"

namespace mirrored {


using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline const std::string kBin = MIRRORED_BIN_DIR;

struct ProcessRun {
  std::optional<ProcessExit> exit;
  std::string output;
};

// Runs argv; when `kill_after` is given, SIGKILLs the process group as soon
// as that text appears in its output.
inline ProcessRun RunProcess(const std::vector<std::string>& argv, const std::string& kill_after = "",
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
inline pid_t FindWorker(const fs::path& run_dir, int index) {
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

inline std::string Fingerprint(const std::string& output) {
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
  // A job on small data: two workers x 1 CPU replica x batch 4 of mlp, a
  // checkpoint and a log line every step, the evaluator (when added) polling
  // every 0.1 s.
  std::vector<std::string> SmallDataJob(const fs::path& run, const fs::path& data, const std::string& max_steps,
                                        const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {
        kBin + "/mirrored-launch", "local", "--workers", "2", "--run-dir", run.string(), "--",
        "--data", data.string(), "--model", "mlp", "--batch-per-replica", "4", "--max-steps", max_steps,
        "--checkpoint-every", "1", "--log-every", "1", "--poll-interval", "0.1", "--epochs", "10"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  fs::path dir_;
};

// The eval lines of metrics.jsonl, as (step, checkpoint).
inline std::vector<std::pair<int64_t, std::string>> EvalLines(const fs::path& run) {
  std::vector<std::pair<int64_t, std::string>> lines;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j["kind"] == "eval") lines.emplace_back(j["step"].get<int64_t>(), j["checkpoint"]);
  }
  return lines;
}

// A job started with --evaluator that ended well: its output says `said`
// and the evaluator's last line, and metrics.jsonl's last eval line is of
// `last_checkpoint`. Call it under ASSERT_NO_FATAL_FAILURE.
inline void ExpectEndedWithTheEvaluator(const ProcessRun& run, const fs::path& run_dir, const std::string& said,
                                        const std::string& last_checkpoint) {
  ASSERT_TRUE(run.exit && run.exit->success()) << run.output;
  EXPECT_NE(run.output.find(said), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("[evaluator:0] evaluator done:"), std::string::npos) << run.output;
  std::vector<std::pair<int64_t, std::string>> evals = EvalLines(run_dir);
  ASSERT_FALSE(evals.empty()) << run.output;
  EXPECT_EQ(evals.back().second, last_checkpoint);
}

}  // namespace mirrored
