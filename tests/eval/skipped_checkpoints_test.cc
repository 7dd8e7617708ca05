// The evaluator's record of checkpoints it passed over: a first sighting is
// tentative (looked at again a poll later), a second one of the same
// writing confirms it, and a checkpoint written again starts afresh.
#include "worker/eval/skipped_checkpoints.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

namespace mirrored {
namespace {

namespace fs = std::filesystem;

class SkippedCheckpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-skipped-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "checkpoints" / "ckpt-20");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SkippedCheckpointsTest, ASecondSightingConfirmsAndAWriteStartsAfresh) {
  SkippedCheckpoints skipped(dir_.string());
  EXPECT_FALSE(skipped.Contains(20));
  EXPECT_FALSE(skipped.Confirmed(20));
  skipped.Add(20, DataLossError("first"));
  EXPECT_TRUE(skipped.Contains(20));
  EXPECT_FALSE(skipped.Confirmed(20));
  EXPECT_EQ(skipped.Tentative(), std::vector<int64_t>{20});
  skipped.Add(20, DataLossError("second"));
  EXPECT_TRUE(skipped.Confirmed(20));
  EXPECT_TRUE(skipped.Tentative().empty());
  EXPECT_EQ(skipped.Why(20).message(), "second");
  EXPECT_FALSE(skipped.WrittenAgain(20));
  EXPECT_EQ(skipped.size(), 1);

  // Written again (a chief redoing the step): retried, and a new sighting
  // of that writing is tentative again.
  const fs::path ckpt = dir_ / "checkpoints" / "ckpt-20";
  fs::last_write_time(ckpt, fs::last_write_time(ckpt) + std::chrono::seconds(5));
  EXPECT_TRUE(skipped.WrittenAgain(20));
  skipped.Add(20, DataLossError("rewritten, still damaged"));
  EXPECT_FALSE(skipped.WrittenAgain(20));
  EXPECT_FALSE(skipped.Confirmed(20));
  skipped.Remove(20);
  EXPECT_FALSE(skipped.Contains(20));
}

// Damaged, then gone on its second look (pruned, or removed by a chief
// redoing its step): confirmed by that look, as the follower's comment
// says (it took a third look, a poll later). Back again, it is retried.
TEST_F(SkippedCheckpointsTest, AGoneCheckpointIsConfirmedOnItsSecondLook) {
  SkippedCheckpoints skipped(dir_.string());
  skipped.Add(20, DataLossError("damaged"));
  fs::remove_all(dir_ / "checkpoints" / "ckpt-20");
  EXPECT_TRUE(skipped.WrittenAgain(20));  // gone counts as changed
  skipped.Add(20, skipped.Why(20));       // gone on its second look
  EXPECT_TRUE(skipped.Confirmed(20));
  EXPECT_TRUE(skipped.Tentative().empty());
  EXPECT_FALSE(skipped.WrittenAgain(20));  // still gone: nothing to retry
  fs::create_directories(dir_ / "checkpoints" / "ckpt-20");
  EXPECT_TRUE(skipped.WrittenAgain(20));
}

TEST_F(SkippedCheckpointsTest, RemoveAfterForgetsTheLaterSteps) {
  SkippedCheckpoints skipped(dir_.string());
  for (int64_t step : {10, 20, 30}) skipped.Add(step, NotFoundError("gone"));
  skipped.RemoveAfter(20);
  EXPECT_TRUE(skipped.Contains(10));
  EXPECT_TRUE(skipped.Contains(20));
  EXPECT_FALSE(skipped.Contains(30));
  EXPECT_EQ(skipped.size(), 2);
}

}  // namespace
}  // namespace mirrored
