// mirrored-worker started by hand, without mirrored-launch: a chief without
// --run-dir says once that it saves nothing (the launcher always gives one).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/launcher_environment.h"
#include "tests/util/worker_process.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

const std::string kWorker = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
const std::string kWarning = "no --run-dir: this run saves nothing (no checkpoint, no metrics.jsonl";

// The output of mirrored-worker with `args`; a missing --data makes it stop
// (exit 2) right after the start-up lines, before any training.
std::string Output(std::vector<std::string> args, std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {kWorker, "--data", "/nonexistent", "--device", "cpu"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back("PATH=/usr/bin:/bin");
  auto w = testing_util::WorkerProcess::Start(argv, env);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return "";
  auto exit = (*w)->WaitExit(60s);
  EXPECT_TRUE(exit.has_value()) << (*w)->output();
  if (exit) {
    EXPECT_EQ(exit->ShellCode(), 2) << (*w)->output();
  }
  return (*w)->output();
}

TEST(LoneWorkerTest, AChiefWithoutRunDirSaysItSavesNothing) {
  const std::string alone = Output({});
  EXPECT_NE(alone.find(" W [worker:0] main.cc:"), std::string::npos) << alone;  // a warning
  EXPECT_NE(alone.find(kWarning), std::string::npos) << alone;
}

TEST(LoneWorkerTest, NoWarningWithARunDirOrUnderTheLauncher) {
  for (const auto& [args, env] : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"--run-dir", ::testing::TempDir() + "/lone-worker-run"}, {}},
           {{}, {std::string(kGenerationVariable) + "=0"}}}) {
    const std::string out = Output(args, env);
    EXPECT_EQ(out.find(kWarning), std::string::npos) << out;
    EXPECT_NE(out.find("/nonexistent/train-images-idx3-ubyte.gz: no such file"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace mirrored
