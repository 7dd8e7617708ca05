// The evaluator's TensorBoard events: a SessionLog START before the first
// point, and after a restart behind what was evaluated, at the restart's
// step + 1, whatever checkpoint is recorded next.
#include "worker/eval/evaluation_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "proto/tensorboard_event.pb.h"
#include "worker/summary/tfrecord_writer.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;

class EvaluationLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-eval-log-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static CheckpointInfo Checkpoint(int64_t step) {
    CheckpointInfo info;
    info.step = step;
    info.state.step = step;
    return info;
  }
  // The event file's STARTs and loss points, in order: {"start", step} or
  // {"loss", step}.
  std::vector<std::pair<std::string, int64_t>> Events() const {
    std::vector<std::pair<std::string, int64_t>> events;
    for (const auto& entry : fs::directory_iterator(dir_ / "logs" / "eval")) {
      auto records = ReadTfRecords(entry.path().string());
      EXPECT_TRUE(records.ok()) << records.status();
      if (!records.ok()) continue;
      for (const std::string& record : *records) {
        tensorflow::Event e;
        EXPECT_TRUE(e.ParseFromString(record));
        if (e.has_session_log() && e.session_log().status() == tensorflow::SessionLog::START) {
          events.emplace_back("start", e.step());
        }
        if (e.has_summary() && e.summary().value_size() > 0 && e.summary().value(0).tag() == "loss") {
          events.emplace_back("loss", e.step());
        }
      }
    }
    return events;
  }
  fs::path dir_;
};

// The job restarted from step 20, behind ckpt-30 evaluated: the next record
// is ckpt-10's, found whole on its second look. Its START is at 21, where
// the steps evaluated again begin: at 10 it discarded ckpt-20's point,
// which is not evaluated again.
TEST_F(EvaluationLogTest, AfterARestartAnOlderCheckpointRecordedFirstKeepsTheStartAtTheRestart) {
  auto log = EvaluationLog::Open(dir_.string());
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Record(Checkpoint(20), false, 0.5, 0.8).ok());
  ASSERT_TRUE((*log)->Record(Checkpoint(30), false, 0.4, 0.85).ok());
  (*log)->RestartedFrom(20);
  ASSERT_TRUE((*log)->Record(Checkpoint(10), false, 0.6, 0.7).ok());
  ASSERT_TRUE((*log)->Record(Checkpoint(30), false, 0.45, 0.84).ok());
  EXPECT_EQ(Events(), (std::vector<std::pair<std::string, int64_t>>{
                          {"start", 20}, {"loss", 20}, {"loss", 30}, {"start", 21}, {"loss", 10}, {"loss", 30}}));
}

}  // namespace
}  // namespace mirrored
