// When the evaluator is done, from what one poll found: the chief's
// training-done record, or for an evaluator alone without a readable
// record the newest checkpoint's "final" mark; a damaged last checkpoint is
// an error only when a second look, a poll later, finds it damaged still.
#include "worker/eval/job_end_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "common/run_dir/run_dir_lock.h"
#include "worker/checkpoint/training_done.h"
#include "worker/checkpoint/training_start.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;
using Outcome = JobEndWatch::Outcome;

class JobEndWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-job-end-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    for (int step : {10, 20, 30}) fs::create_directories(dir_ / "checkpoints" / ("ckpt-" + std::to_string(step)));
  }
  void TearDown() override { fs::remove_all(dir_); }

  CheckpointInfo Complete(int64_t step, bool final = false) const {
    CheckpointInfo info;
    info.step = step;
    info.dir = (dir_ / "checkpoints" / ("ckpt-" + std::to_string(step))).string();
    info.state.step = step;
    info.state.final = final;
    return info;
  }
  // Listed, but damaged; `final`: what its state.json says, nullopt when it
  // cannot be read.
  static CheckpointReader::Skipped Damaged(int64_t step, std::optional<bool> final) {
    CheckpointReader::Skipped d{step, DataLossError("ckpt-" + std::to_string(step) + " is damaged"), std::nullopt};
    if (final) {
      d.state.emplace();
      d.state->step = step;
      d.state->final = *final;
    }
    return d;
  }
  JobEndWatch Alone() const { return JobEndWatch(FileEnv::Default(), dir_.string(), false, std::nullopt); }

  fs::path dir_;
  std::vector<CheckpointReader::Skipped> damaged_;
};

TEST_F(JobEndWatchTest, AloneTheFinalMarkEndsOnceItsCheckpointIsEvaluated) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(10), Complete(20, true)};
  EXPECT_EQ(watch.Check({listed, damaged_}, 10, skipped, 1).outcome, Outcome::kGoingOn);
  const JobEndWatch::Verdict v = watch.Check({listed, damaged_}, 20, skipped, 2);
  EXPECT_EQ(v.outcome, Outcome::kEnded);
  EXPECT_EQ(v.final_step, 20);
}

// A chief that started from the marked checkpoint trains on: its
// training-start record says so, or, before it has written it, its lock.
TEST_F(JobEndWatchTest, TheFinalMarkIsNoEndWhileAChiefTrainsOnFromIt) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(20, true)};
  {
    auto chief = RunDirLock::Acquire(dir_.string());
    ASSERT_TRUE(chief.ok()) << chief.status();
    EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 1).outcome, Outcome::kGoingOn);
  }
  ASSERT_TRUE(TrainingStart::Write(FileEnv::Default(), dir_.string(), 20).ok());
  EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 1).outcome, Outcome::kGoingOn);
  ASSERT_TRUE(TrainingStart::Write(FileEnv::Default(), dir_.string(), 10).ok());  // an earlier start: ended at 20
  EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 1).outcome, Outcome::kEnded);
}

TEST_F(JobEndWatchTest, ATrainingDoneRecordEndsOnceItsCheckpointIsEvaluated) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 30).ok());
  // No final mark needed: the record names the last checkpoint.
  const StatusOr<std::vector<CheckpointInfo>> listed =
      std::vector<CheckpointInfo>{Complete(10), Complete(20), Complete(30)};
  EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 2).outcome, Outcome::kGoingOn);
  const JobEndWatch::Verdict v = watch.Check({listed, damaged_}, 30, skipped, 3);
  EXPECT_EQ(v.outcome, Outcome::kEnded);
  EXPECT_EQ(v.final_step, 30);
}

// Beside a job, a record that was there as the evaluator started may be an
// earlier run's that this job is about to extend; one that changed since is
// this run's.
TEST_F(JobEndWatchTest, BesideAJobOnlyARecordWrittenSinceTheStartEndsAtOnce) {
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 30).ok());
  auto record = TrainingDone::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(record.ok() && record->has_value());
  JobEndWatch watch(FileEnv::Default(), dir_.string(), /*beside_a_job=*/true, (*record)->run);
  SkippedCheckpoints skipped(dir_.string());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(30, true)};
  EXPECT_EQ(watch.Check({listed, damaged_}, 30, skipped, 1).outcome, Outcome::kGoingOn);
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 30).ok());  // a new run's record
  EXPECT_EQ(watch.Check({listed, damaged_}, 30, skipped, 1).outcome, Outcome::kEnded);
}

// A checkpoint being replaced (a chief redoing its step) can be caught
// mid-way and found damaged: the job's last one is given a second look a
// poll later before the evaluator fails on it.
TEST_F(JobEndWatchTest, ADamagedLastCheckpointIsLostOnlyWhenASecondLookFindsItDamaged) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 20).ok());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(10), Complete(20)};
  skipped.Add(20, DataLossError("model.safetensors is damaged"));  // its load failed
  EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 1).outcome, Outcome::kGoingOn);
  skipped.Add(20, DataLossError("model.safetensors is damaged"));  // and again, a poll later
  const JobEndWatch::Verdict v = watch.Check({listed, damaged_}, 20, skipped, 1);
  EXPECT_EQ(v.outcome, Outcome::kLastCheckpointLost);
  EXPECT_EQ(v.lost.code(), StatusCode::kDataLoss);
  EXPECT_EQ(v.lost.message(), "the job's last checkpoint ckpt-20 could not be evaluated: model.safetensors is damaged");
}

TEST_F(JobEndWatchTest, ADamagedFinalMarkedCheckpointIsLostOnlyWhenASecondLookFindsItDamaged) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(10)};
  damaged_ = {Damaged(20, true)};
  skipped.Add(20, damaged_[0].why);
  EXPECT_EQ(watch.Check({listed, damaged_}, 10, skipped, 1).outcome, Outcome::kGoingOn);
  skipped.Add(20, damaged_[0].why);
  const JobEndWatch::Verdict v = watch.Check({listed, damaged_}, 10, skipped, 1);
  EXPECT_EQ(v.outcome, Outcome::kLastCheckpointLost);
  EXPECT_EQ(v.lost.message(), "the job's last checkpoint ckpt-20 could not be evaluated: ckpt-20 is damaged");
}

// A damaged newest checkpoint whose state.json says it is not final: the
// job did not end there (a chief would resume before it and write it anew).
TEST_F(JobEndWatchTest, ADamagedNewestCheckpointNotMarkedFinalIsNoEnd) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(20, true)};
  damaged_ = {Damaged(30, false)};
  skipped.Add(30, damaged_[0].why);
  skipped.Add(30, damaged_[0].why);
  EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 1).outcome, Outcome::kGoingOn);
}

// A newer damaged checkpoint whose state.json cannot be read (a partial
// copy): nothing says the job went on past the final mark (a chief would
// resume from the marked one too), so once a second look finds it so, the
// evaluated final checkpoint ends the run. It hid it, and the evaluator
// waited for ever.
TEST_F(JobEndWatchTest, ANewerCheckpointWhoseStateCannotBeReadDoesNotHideTheFinalMark) {
  JobEndWatch watch = Alone();
  SkippedCheckpoints skipped(dir_.string());
  const StatusOr<std::vector<CheckpointInfo>> listed = std::vector<CheckpointInfo>{Complete(10), Complete(20, true)};
  damaged_ = {Damaged(30, std::nullopt)};
  skipped.Add(30, damaged_[0].why);
  EXPECT_EQ(watch.Check({listed, damaged_}, 20, skipped, 0).outcome, Outcome::kGoingOn);  // its second look first
  skipped.Add(30, damaged_[0].why);
  const JobEndWatch::Verdict v = watch.Check({listed, damaged_}, 20, skipped, 0);
  EXPECT_EQ(v.outcome, Outcome::kEnded);
  EXPECT_EQ(v.final_step, 20);
}

}  // namespace
}  // namespace mirrored
