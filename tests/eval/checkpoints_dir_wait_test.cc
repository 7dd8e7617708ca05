// The evaluator's wait for RUN_DIR/checkpoints: a path that can never become
// a run directory fails at once, naming the problem; a missing one is waited
// for, without making anything, until --eval-timeout.
#include "worker/eval/checkpoints_dir_wait.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mirrored {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class CheckpointsDirWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-eval-wait-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "a-file") << "x";
    // Bounded either way: a wait that should not happen ends after 2 s
    // with a summary, and the test then fails on it.
    options_.poll_interval = std::chrono::duration<double>(0.05);
    options_.eval_timeout = std::chrono::duration<double>(2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  EvaluatorOptions options_;
};

TEST_F(CheckpointsDirWaitTest, ARunDirectoryUnderARegularFileFailsAtOnceNamingTheFile) {
  options_.eval_timeout = std::chrono::duration<double>(60);
  options_.run_dir = (dir_ / "a-file" / "sub").string();
  const auto start = Clock::now();
  auto waited = WaitForCheckpointsDir(options_);
  ASSERT_FALSE(waited.ok()) << "waited as if the directory were only missing";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));  // at once: not the 60 s eval timeout
  EXPECT_EQ(waited.status().code(), StatusCode::kInvalidArgument) << waited.status();
  EXPECT_EQ(waited.status().message(),
            "--run-dir " + options_.run_dir + ": " + (dir_ / "a-file").string() + " is not a directory");
}

TEST_F(CheckpointsDirWaitTest, ARunDirectoryThatIsARegularFileFailsAtOnce) {
  options_.run_dir = (dir_ / "a-file").string();
  auto waited = WaitForCheckpointsDir(options_);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), StatusCode::kInvalidArgument) << waited.status();
  EXPECT_EQ(waited.status().message(), "--run-dir " + options_.run_dir + " is not a directory");
}

TEST_F(CheckpointsDirWaitTest, AMissingRunDirectoryIsWaitedForUntilTheTimeoutWithoutMakingIt) {
  options_.run_dir = (dir_ / "not-yet").string();
  options_.eval_timeout = std::chrono::duration<double>(0.2);
  auto waited = WaitForCheckpointsDir(options_);
  ASSERT_TRUE(waited.ok()) << waited.status();
  ASSERT_TRUE(waited->has_value()) << "did not end on --eval-timeout";
  EXPECT_EQ((*waited)->evaluations, 0);
  EXPECT_FALSE((*waited)->stop_signal.has_value());
  EXPECT_FALSE(fs::exists(dir_ / "not-yet"));
}

TEST_F(CheckpointsDirWaitTest, ACheckpointsDirectoryThereEndsTheWaitAtOnce) {
  fs::create_directories(dir_ / "run" / "checkpoints");
  options_.run_dir = (dir_ / "run").string();
  auto waited = WaitForCheckpointsDir(options_);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_FALSE(waited->has_value());
}

// A network file system's passing error while the wait goes on (an NFS
// server's ESTALE, EIO, ETIMEDOUT) is no reason to end the evaluator: it
// failed with exit 1 on the first one. At the first look it still fails.
TEST_F(CheckpointsDirWaitTest, APassingErrorWhileWaitingIsPolledThroughButNotAtTheFirstLook) {
  options_.run_dir = (dir_ / "run").string();
  std::vector<int> answers = {ENOENT, ESTALE, EIO, ETIMEDOUT, ENOENT, 0};
  size_t looks = 0;
  auto stat_errno = [&](const std::string& path) {
    EXPECT_EQ(path, (dir_ / "run" / "checkpoints").string());
    return looks < answers.size() ? answers[looks++] : 0;
  };
  auto waited = WaitForCheckpointsDir(options_, stat_errno);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_FALSE(waited->has_value()) << "ended on --eval-timeout";
  EXPECT_EQ(looks, answers.size());

  answers = {ESTALE};
  looks = 0;
  auto first = WaitForCheckpointsDir(options_, stat_errno);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable) << first.status();
  EXPECT_NE(first.status().message().find("cannot look for " + (dir_ / "run" / "checkpoints").string()),
            std::string::npos)
      << first.status();
}

// A path that turns into one that can never work while it is waited for
// fails (exit 2) instead of waiting until --eval-timeout.
TEST_F(CheckpointsDirWaitTest, AConfigurationErrorWhileWaitingFailsAtOnce) {
  options_.run_dir = (dir_ / "run").string();
  for (int err : {EACCES, ELOOP, ENAMETOOLONG, ENOTDIR}) {
    std::vector<int> answers = {ENOENT, EIO, err};
    size_t looks = 0;
    auto waited = WaitForCheckpointsDir(options_, [&](const std::string&) {
      return looks < answers.size() ? answers[looks++] : ENOENT;
    });
    ASSERT_FALSE(waited.ok()) << "errno " << err << ": waited on";
    EXPECT_EQ(waited.status().code(), StatusCode::kInvalidArgument) << waited.status();
    EXPECT_EQ(looks, answers.size());
  }
}

}  // namespace
}  // namespace mirrored
