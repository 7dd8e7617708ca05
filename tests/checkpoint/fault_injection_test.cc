// A checkpoint write with a fault injected at EVERY file operation, both as
// "this operation fails" and as "the machine crashes here" (later operations
// do nothing and unsynced data and directory entries are lost). Afterwards
// the directory must hold only complete checkpoints, the reader must return
// the previous checkpoint (or the new one once its rename is durable), and a
// re-opened writer must carry on cleanly.
#include <gtest/gtest.h>

#include <algorithm>

#include "checkpoint_test_util.h"
#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"
#include "tests/util/fault_injecting_file_env.h"

namespace mirrored {
namespace {

using Mode = FaultInjectingFileEnv::Mode;

struct Scenario {
  Mode mode;
  int keep;
  int64_t second_step;  // 20: a new step; 10: rewriting ckpt-10 (as final)
};

void PrintTo(const Scenario& s, std::ostream* os) {
  *os << (s.mode == Mode::kFail ? "fail" : "crash") << ", keep " << s.keep << ", second step "
      << s.second_step;
}

std::string Name(const ::testing::TestParamInfo<Scenario>& info) {
  return std::string(info.param.mode == Mode::kFail ? "Fail" : "Crash") + "Keep" +
         std::to_string(info.param.keep) + (info.param.second_step == 10 ? "Rewrite" : "");
}

class FaultInjectionTest : public ::testing::TestWithParam<Scenario> {
 protected:
  void SetUp() override { SetLogLevel(LogLevel::kError); }
  void TearDown() override { SetLogLevel(LogLevel::kInfo); }

  // ckpt-10 written cleanly, as by an earlier incarnation of the job.
  static void WriteFirst(const std::string& run_dir) {
    CheckpointWriter writer(FileEnv::Default(), run_dir, {.keep_checkpoints = GetParam().keep});
    ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  }
};

TEST_P(FaultInjectionTest, EveryOperation) {
  const Scenario scenario = GetParam();
  // The second checkpoint is marked final, which tells it from the first
  // when both have step 10.
  const int64_t second = scenario.second_step;
  const std::string second_name = "/checkpoints/" + CheckpointDirName(second);
  // A fault-free run numbers the operations of writing the second checkpoint.
  std::vector<std::string> reference;
  {
    ScratchDir dir;
    WriteFirst(dir.path());
    FaultInjectingFileEnv env(FileEnv::Default());
    CheckpointWriter writer(&env, dir.path(), {.keep_checkpoints = scenario.keep});
    ASSERT_TRUE(writer.Write(TestModel(second).Contents(true)).ok());
    reference = env.operation_log();
  }
  // The rename (or exchange) that publishes the second checkpoint and the
  // directory fsync that makes it durable.
  int64_t publish = -1, durable = -1;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (publish < 0 && reference[i].find("/.tmp-ckpt-") != std::string::npos &&
        reference[i].ends_with(second_name)) {
      publish = static_cast<int64_t>(i);
    } else if (publish >= 0 && durable < 0 &&
               reference[i].find("fsync directory") != std::string::npos &&
               reference[i].ends_with("/checkpoints")) {
      durable = static_cast<int64_t>(i);
    }
  }
  ASSERT_GE(publish, 0) << "no publishing rename in the reference run";
  ASSERT_GT(durable, publish);
  ASSERT_GT(reference.size(), 20u);

  for (int64_t n = 0; n < static_cast<int64_t>(reference.size()); ++n) {
    SCOPED_TRACE("fault at " + reference[static_cast<size_t>(n)]);
    ScratchDir dir;
    WriteFirst(dir.path());
    Status written;
    {
      FaultInjectingFileEnv env(FileEnv::Default());
      env.InjectFault(scenario.mode, n);
      CheckpointWriter writer(&env, dir.path(), {.keep_checkpoints = scenario.keep});
      written = writer.Write(TestModel(second).Contents(true));
      if (scenario.mode == Mode::kCrash) {
        ASSERT_TRUE(env.DropUnsyncedState().ok());
      }
    }

    // Every ckpt-* directory is complete.
    CheckpointReader reader(FileEnv::Default(), dir.path());
    auto steps = reader.ListCheckpointSteps();
    ASSERT_TRUE(steps.ok()) << steps.status();
    auto complete = reader.ListComplete();
    ASSERT_TRUE(complete.ok()) << complete.status();
    ASSERT_EQ(complete->size(), steps->size()) << "a ckpt-* directory is partial";

    auto loaded = reader.LoadLatest();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const int64_t step = loaded->info.step;
    const bool is_new = loaded->info.state.final;
    ASSERT_EQ(step, is_new ? second : 10);
    TestModel(step).ExpectMatches(*loaded, is_new);
    // (A failed FileExists() only reads as "absent", which the writer survives.)
    if (n <= publish && !written.ok()) {
      EXPECT_FALSE(is_new) << "new checkpoint visible though the write failed before its rename";
    }
    if (n > durable || written.ok()) {
      EXPECT_TRUE(is_new) << "durable new checkpoint lost";
    }
    // The index is whole and names a complete checkpoint.
    auto index = CheckpointIndex::Read(FileEnv::Default(), dir.path());
    ASSERT_TRUE(index.ok()) << index.status();
    ASSERT_TRUE(index->latest.has_value());
    EXPECT_TRUE(reader.Inspect(*index->latest).ok()) << "index names a missing checkpoint";

    // Re-open: a new writer continues and cleans up.
    {
      CheckpointWriter writer(FileEnv::Default(), dir.path(), {.keep_checkpoints = scenario.keep});
      ASSERT_TRUE(writer.Write(TestModel(30).Contents()).ok());
    }
    auto names = FileEnv::Default()->ListDir(CheckpointsDir(dir.path()));
    ASSERT_TRUE(names.ok());
    for (const std::string& name : *names) EXPECT_FALSE(name.starts_with(".tmp-")) << name;
    auto after = reader.ListComplete();
    ASSERT_TRUE(after.ok());
    ASSERT_FALSE(after->empty());
    EXPECT_EQ(after->back().step, 30);
    EXPECT_LE(static_cast<int>(after->size()), scenario.keep);
    EXPECT_EQ(CheckpointIndex::Read(FileEnv::Default(), dir.path())->latest, 30);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, FaultInjectionTest,
    ::testing::Values(Scenario{Mode::kFail, 1, 20}, Scenario{Mode::kFail, 2, 20},
                      Scenario{Mode::kCrash, 1, 20}, Scenario{Mode::kCrash, 2, 20},
                      Scenario{Mode::kFail, 2, 10}, Scenario{Mode::kCrash, 2, 10}),
    Name);

// The fault env itself: unsynced data and entries are dropped on a crash.
TEST(FaultInjectingFileEnvTest, DropsUnsyncedState) {
  ScratchDir dir;
  FaultInjectingFileEnv env(FileEnv::Default());
  const std::string synced = dir.path() + "/synced", partial = dir.path() + "/partial";
  {
    auto f = env.NewWritableFile(synced);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("abc").ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Append("def").ok());
  }
  ASSERT_TRUE(env.SyncDir(dir.path()).ok());
  {
    auto f = env.NewWritableFile(partial);  // name never synced
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("x").ok());
    ASSERT_TRUE((*f)->Sync().ok());
  }
  env.InjectFault(Mode::kCrash, env.operation_count());
  EXPECT_FALSE(env.CreateDir(dir.path() + "/never").ok());
  EXPECT_FALSE(env.FileExists(synced)) << "no operation after a crash";
  EXPECT_TRUE(env.crashed());
  ASSERT_TRUE(env.DropUnsyncedState().ok());
  EXPECT_EQ(*FileEnv::Default()->ReadFile(synced), "abc");
  EXPECT_FALSE(FileEnv::Default()->FileExists(partial));
  EXPECT_FALSE(FileEnv::Default()->FileExists(dir.path() + "/never"));
}

}  // namespace
}  // namespace mirrored
