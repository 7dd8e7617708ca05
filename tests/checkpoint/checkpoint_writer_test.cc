#include "worker/checkpoint/checkpoint_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "checkpoint_test_util.h"
#include "common/run_dir/checkpoint_index.h"
#include "worker/checkpoint/evaluator_lease.h"
#include "tests/util/fault_injecting_file_env.h"

namespace mirrored {
namespace {

std::vector<std::string> Entries(const std::string& dir) {
  auto names = FileEnv::Default()->ListDir(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  std::vector<std::string> out = names.ok() ? *names : std::vector<std::string>{};
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> CompleteSteps(const std::string& run_dir) {
  auto list = ListCompleteCheckpoints(run_dir);
  EXPECT_TRUE(list.ok()) << list.status();
  std::vector<int64_t> steps;
  if (list.ok())
    for (const CheckpointInfo& i : *list) steps.push_back(i.step);
  return steps;
}

TEST(CheckpointWriterTest, RoundTripAndLayout) {
  ScratchDir dir;
  const std::string run_dir = dir.path() + "/run";  // created by the writer
  CheckpointWriter writer(FileEnv::Default(), run_dir);
  TestModel model(30);
  ASSERT_TRUE(writer.Write(model.Contents()).ok());
  EXPECT_EQ(Entries(CheckpointsDir(run_dir)), (std::vector<std::string>{"checkpoint", "ckpt-30"}));
  EXPECT_EQ(Entries(run_dir + "/checkpoints/ckpt-30"),
            (std::vector<std::string>{"model.safetensors", "optimizer.safetensors", "state.json"}));
  CheckpointReader reader(FileEnv::Default(), run_dir);
  auto loaded = reader.LoadLatest();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  model.ExpectMatches(*loaded);
  auto index = CheckpointIndex::Read(FileEnv::Default(), run_dir);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, (CheckpointIndex{30, {30}, {}}));
  auto found = FindLatestCheckpoint(run_dir);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->step, 30);
  EXPECT_EQ((*found)->state.step_in_epoch, 0);
}

TEST(CheckpointWriterTest, NoCheckpointsIsNotAnError) {
  ScratchDir dir;
  auto found = FindLatestCheckpoint(dir.path());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(found->has_value());
  EXPECT_TRUE(CompleteSteps(dir.path()).empty());
}

TEST(CheckpointWriterTest, RejectsInvalidContents) {
  ScratchDir dir;
  CheckpointWriter writer(FileEnv::Default(), dir.path());
  const TestModel model(1);  // owns the tensors `c` points at
  CheckpointContents c = model.Contents();
  c.state.model.clear();
  EXPECT_EQ(writer.Write(c).code(), StatusCode::kInvalidArgument);
  c = model.Contents();
  c.model.push_back(c.model[0]);  // duplicate name
  Status s = writer.Write(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dense/kernel"), std::string::npos) << s;
}

TEST(CheckpointWriterTest, PruningKeepsNewestK) {
  ScratchDir dir;
  CheckpointWriter writer(FileEnv::Default(), dir.path(), {.keep_checkpoints = 3});
  for (int64_t step : {10, 20, 30, 40, 50})
    ASSERT_TRUE(writer.Write(TestModel(step).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{30, 40, 50}));
  EXPECT_EQ(*CheckpointIndex::Read(FileEnv::Default(), dir.path()),
            (CheckpointIndex{50, {30, 40, 50}, {10, 20}}));
  EXPECT_EQ(Entries(CheckpointsDir(dir.path())),
            (std::vector<std::string>{"checkpoint", "ckpt-30", "ckpt-40", "ckpt-50"}));
}

// The index lists what pruning deleted: across writers (a chief resuming
// from step 20 keeps the entries up to its start; the earlier run's ckpt-40,
// deleted as this run replaces it, is not one of this run's pruned
// checkpoints, nor is ckpt-30, written again), once each, the newest
// kMaxPrunedListed.
TEST(CheckpointWriterTest, TheIndexListsPrunedCheckpointsAcrossARestart) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  {
    CheckpointWriter first(env, dir.path(), {.keep_checkpoints = 1});
    for (int64_t step : {10, 20, 30, 40}) ASSERT_TRUE(first.Write(TestModel(step).Contents()).ok());
    EXPECT_EQ(CheckpointIndex::Read(env, dir.path())->pruned, (std::vector<int64_t>{10, 20, 30}));
  }
  CheckpointWriter resumed(env, dir.path(), {.keep_checkpoints = 1, .start_run = "b", .start_step = 20});
  ASSERT_TRUE(resumed.Write(TestModel(30).Contents()).ok());  // the earlier run's ckpt-40 goes
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{30}));
  EXPECT_EQ(CheckpointIndex::Read(env, dir.path())->pruned, (std::vector<int64_t>{10, 20}));
  ASSERT_TRUE(resumed.Write(TestModel(40).Contents()).ok());
  EXPECT_EQ(*CheckpointIndex::Read(env, dir.path()), (CheckpointIndex{40, {40}, {10, 20, 30}}));
  ASSERT_TRUE(resumed.Write(TestModel(50).Contents()).ok());
  EXPECT_EQ(CheckpointIndex::Read(env, dir.path())->pruned, (std::vector<int64_t>{10, 20, 30, 40}));
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{50}));

  CheckpointWriter long_run(env, dir.path(), {.keep_checkpoints = 1, .start_run = "c", .start_step = 50});
  for (int64_t step = 60; step < 60 + 10 * int64_t(kMaxPrunedListed); step += 10)
    ASSERT_TRUE(long_run.Write(TestModel(step).Contents()).ok());
  const std::vector<int64_t> pruned = CheckpointIndex::Read(env, dir.path())->pruned;
  ASSERT_EQ(pruned.size(), kMaxPrunedListed);
  EXPECT_EQ(pruned.back(), 60 + 10 * (int64_t(kMaxPrunedListed) - 2));
}

TEST(CheckpointWriterTest, PruningNeverRemovesTheLeasedCheckpoint) {
  ScratchDir dir;
  CheckpointWriter writer(FileEnv::Default(), dir.path(), {.keep_checkpoints = 2});
  ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  ASSERT_TRUE(writer.Write(TestModel(20).Contents()).ok());
  // A lease that protects only what it reads (not following a backlog), as
  // an evaluator of an earlier version wrote it.
  const std::string lease = JoinPath(CheckpointsDir(dir.path()), kEvalLeaseFileName);
  std::ofstream(lease) << R"({"reading":"ckpt-10","last_evaluated_step":null,"following":false})";
  for (int64_t step : {30, 40, 50}) ASSERT_TRUE(writer.Write(TestModel(step).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{10, 40, 50}));
  EXPECT_EQ(CheckpointIndex::Read(FileEnv::Default(), dir.path())->kept,
            (std::vector<int64_t>{10, 40, 50}));
  // The evaluator is done with it: the next write prunes it.
  std::ofstream(lease, std::ios::trunc) << R"({"reading":null,"last_evaluated_step":10,"following":false})";
  ASSERT_TRUE(writer.Write(TestModel(60).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{50, 60}));
}

// A chief that started from step 20 (training_start.h): an evaluator's
// progress recorded under another start, past step 20, counts only up to 20
// (those checkpoints were lost); under this start it counts in full.
TEST(CheckpointWriterTest, ProgressOfAnEarlierStartCountsOnlyUpToThisStart) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  CheckpointWriter writer(env, dir.path(), {.keep_checkpoints = 1, .start_run = "new", .start_step = 20});
  ASSERT_TRUE(EvaluatorLease::Follow(env, dir.path()).ok());
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 50, "old").ok());
  for (int64_t step : {30, 40}) ASSERT_TRUE(writer.Write(TestModel(step).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{30, 40}));  // ckpt-30 kept for the evaluator
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 50, "new").ok());
  ASSERT_TRUE(writer.Write(TestModel(60).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{60}));
  auto lease = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->start_run, "new");  // written and read back
}

TEST(CheckpointWriterTest, AFollowingEvaluatorsBacklogIsKeptWithinTwiceK) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  CheckpointWriter writer(env, dir.path(), {.keep_checkpoints = 2});
  ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  ASSERT_TRUE(EvaluatorLease::Follow(env, dir.path()).ok());
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 10).ok());
  // Nothing after step 10 is evaluated: the backlog is kept among the newest
  // 2K = 4, ckpt-10 (evaluated) goes as usual.
  for (int64_t step : {20, 30, 40}) ASSERT_TRUE(writer.Write(TestModel(step).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{20, 30, 40}));
  ASSERT_TRUE(writer.Write(TestModel(50).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{20, 30, 40, 50}));
  EXPECT_EQ(CheckpointIndex::Read(env, dir.path())->kept, (std::vector<int64_t>{20, 30, 40, 50}));
  // More than 2K behind: the oldest unevaluated one is pruned.
  ASSERT_TRUE(writer.Write(TestModel(60).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{30, 40, 50, 60}));
  // The evaluator reads ckpt-30 and is done with it and ckpt-40: the writer
  // keeps the newest K plus the rest of the backlog.
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 30).ok());
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 40).ok());
  ASSERT_TRUE(writer.Write(TestModel(70).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{50, 60, 70}));
  // The evaluator ended: plain K again.
  ASSERT_TRUE(EvaluatorLease::Stop(env, dir.path()).ok());
  ASSERT_TRUE(writer.Write(TestModel(80).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{70, 80}));
}

TEST(CheckpointWriterTest, TheReadCheckpointIsKeptBeyondTheBacklogBound) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  CheckpointWriter writer(env, dir.path(), {.keep_checkpoints = 1});
  ASSERT_TRUE(EvaluatorLease::Follow(env, dir.path()).ok());
  ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 10).ok());
  for (int64_t step : {20, 30, 40}) ASSERT_TRUE(writer.Write(TestModel(step).Contents()).ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{10, 30, 40}));
}

TEST(CheckpointWriterTest, RewritingAStepReplacesIt) {
  ScratchDir dir;
  CheckpointWriter writer(FileEnv::Default(), dir.path());
  ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  ASSERT_TRUE(writer.Write(TestModel(10).Contents(/*final=*/true)).ok());
  auto found = FindLatestCheckpoint(dir.path());
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_TRUE((*found)->state.final);
  EXPECT_EQ(Entries(CheckpointsDir(dir.path())),
            (std::vector<std::string>{"checkpoint", "ckpt-10"}));
}

TEST(CheckpointWriterTest, AsyncWritesSnapshotTheTensors) {
  ScratchDir dir;
  CheckpointWriter writer(FileEnv::Default(), dir.path(), {.keep_checkpoints = 10});
  for (int64_t step = 1; step <= 4; ++step) {
    TestModel model(step, /*scale=*/1000);
    ASSERT_TRUE(writer.WriteAsync(model.Contents()).ok());
    // `model` dies here, while the background write may still run.
  }
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{1, 2, 3, 4}));
  CheckpointReader reader(FileEnv::Default(), dir.path());
  for (int64_t step = 1; step <= 4; ++step) {
    auto loaded = reader.Load(step);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    TestModel(step, 1000).ExpectMatches(*loaded);
  }
}

TEST(CheckpointWriterTest, AsyncErrorIsReportedExactlyOnce) {
  ScratchDir dir;
  FaultInjectingFileEnv env(FileEnv::Default());
  CheckpointWriter writer(&env, dir.path());
  ASSERT_TRUE(writer.Write(TestModel(1).Contents()).ok());
  env.InjectFault(FaultInjectingFileEnv::Mode::kFail, env.operation_count() + 6);
  ASSERT_TRUE(writer.WriteAsync(TestModel(2).Contents()).ok());
  Status s = writer.Wait();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("injected fault"), std::string::npos) << s;
  EXPECT_NE(s.message().find("ckpt-2"), std::string::npos) << s;
  EXPECT_TRUE(writer.Wait().ok()) << "reported once";

  // An error surfaces through the next WriteAsync when nobody waited.
  env.InjectFault(FaultInjectingFileEnv::Mode::kFail, env.operation_count() + 6);
  ASSERT_TRUE(writer.WriteAsync(TestModel(3).Contents()).ok());
  Status next = writer.WriteAsync(TestModel(4).Contents());
  EXPECT_FALSE(next.ok());
  EXPECT_NE(next.message().find("ckpt-3"), std::string::npos) << next;
  ASSERT_TRUE(writer.Wait().ok()) << "the failed WriteAsync started nothing";
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{1}));
  ASSERT_TRUE(writer.WriteAsync(TestModel(5).Contents()).ok());
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{1, 5}));
}

// TakeFailure: a failed background write is seen between two writes
// without waiting for one (the trainer checks at its log steps), once.
TEST(CheckpointWriterTest, TakeFailureReportsAFailedBackgroundWriteOnceWithoutAnotherWrite) {
  ScratchDir dir;
  FaultInjectingFileEnv env(FileEnv::Default());
  CheckpointWriter writer(&env, dir.path());
  EXPECT_TRUE(writer.TakeFailure().ok());
  ASSERT_TRUE(writer.Write(TestModel(1).Contents()).ok());
  env.InjectFault(FaultInjectingFileEnv::Mode::kFail, env.operation_count() + 6);
  ASSERT_TRUE(writer.WriteAsync(TestModel(2).Contents()).ok());
  Status s = OkStatus();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.ok() && std::chrono::steady_clock::now() < deadline) {
    s = writer.TakeFailure();
    if (s.ok()) std::this_thread::yield();
  }
  EXPECT_FALSE(s.ok()) << "the failed write was not reported within 10 s";
  EXPECT_NE(s.message().find("ckpt-2"), std::string::npos) << s;
  EXPECT_TRUE(writer.TakeFailure().ok()) << "reported once";
  EXPECT_TRUE(writer.Wait().ok()) << "reported once";
}

// Corrupts file `name` of ckpt-<step> with `edit`.
void Corrupt(const std::string& run_dir, int64_t step, const std::string& name,
             const std::function<void(std::string&)>& edit) {
  const std::string path =
      JoinPath(JoinPath(CheckpointsDir(run_dir), CheckpointDirName(step)), name);
  auto bytes = FileEnv::Default()->ReadFile(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  edit(*bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << *bytes;
}

struct Corruption {
  std::string label;
  std::string file;
  std::function<void(std::string&)> edit;
};
void PrintTo(const Corruption& c, std::ostream* os) { *os << c.label; }

class CorruptNewestTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(CorruptNewestTest, FallsBackToThePreviousCheckpoint) {
  ScratchDir dir;
  {
    CheckpointWriter writer(FileEnv::Default(), dir.path());
    ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
    ASSERT_TRUE(writer.Write(TestModel(20).Contents()).ok());
  }
  Corrupt(dir.path(), 20, GetParam().file, GetParam().edit);
  CheckpointReader reader(FileEnv::Default(), dir.path());
  EXPECT_FALSE(reader.Load(20).ok());
  auto loaded = reader.LoadLatest();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  TestModel(10).ExpectMatches(*loaded);
  auto found = FindLatestCheckpoint(dir.path());
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->step, 10);
}

INSTANTIATE_TEST_SUITE_P(
    Corruptions, CorruptNewestTest,
    ::testing::Values(
        Corruption{"TruncatedModel", kModelFileName,
                   [](std::string& b) { b.resize(b.size() / 2); }},
        Corruption{"FlippedHeaderByte", kOptimizerFileName, [](std::string& b) { b[8] ^= 0x20; }},
        Corruption{"FlippedLengthByte", kModelFileName, [](std::string& b) { b[3] ^= 0x01; }},
        // Same size, other bytes (a bad disk, a partial overwrite): only the
        // CRC-32C recorded in state.json tells.
        Corruption{"FlippedTensorByte", kModelFileName, [](std::string& b) { b[b.size() - 5] ^= 0x40; }},
        Corruption{"OverwrittenSlotBytes", kOptimizerFileName,
                   [](std::string& b) { std::fill(b.end() - 16, b.end(), '\xff'); }},
        Corruption{"TruncatedStateJson", kStateFileName,
                   [](std::string& b) { b.resize(b.size() - 3); }},
        Corruption{"WrongStepInStateJson", kStateFileName,
                   [](std::string& b) { b.replace(b.find("\"step\": 20"), 10, "\"step\": 21"); }},
        // Probe D12: one digit of the epoch, still valid JSON with sane
        // values; only state.json's own CRC-32C tells.
        Corruption{"OneDigitOfTheEpochChanged", kStateFileName,
                   [](std::string& b) {
                     const size_t at = b.find("\"epoch\": ") + 9;
                     b[at] = b[at] == '0' ? '1' : '0';
                   }}),
    [](const ::testing::TestParamInfo<Corruption>& info) { return info.param.label; });

// Probe D13: with every checkpoint damaged the job trained from step 0 and
// replaced them. Now that stops with exit 2 naming them, unless the user
// asks for the fresh start (--restart-from-scratch).
TEST(CheckpointReaderTest, EveryCheckpointDamagedIsAnErrorNamingThemUnlessStartingOverIsAsked) {
  ScratchDir dir;
  {
    CheckpointWriter writer(FileEnv::Default(), dir.path());
    ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
    ASSERT_TRUE(writer.Write(TestModel(20).Contents()).ok());
  }
  for (int64_t step : {10, 20}) Corrupt(dir.path(), step, kModelFileName, [](std::string& b) { b.resize(b.size() / 2); });
  CheckpointReader reader(FileEnv::Default(), dir.path());
  const auto refused = reader.LoadLatest();
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("is damaged (ckpt-10, ckpt-20): not starting over"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--restart-from-scratch"), std::string::npos);
  EXPECT_EQ(reader.LoadLatest(CheckpointReader::IfAllDamaged::kStartOver).status().code(), StatusCode::kNotFound);
  // An export has nothing to start over: it says what is wrong with the latest.
  const auto reported = reader.LoadLatest(CheckpointReader::IfAllDamaged::kReport);
  EXPECT_EQ(reported.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reported.status().message().find("is damaged (ckpt-10, ckpt-20); the latest, ckpt-20: "),
            std::string::npos)
      << reported.status();
  EXPECT_NE(reported.status().message().find("ckpt-20/model.safetensors"), std::string::npos) << reported.status();
  EXPECT_EQ(reported.status().message().find("--restart-from-scratch"), std::string::npos) << reported.status();
  ScratchDir empty;
  EXPECT_EQ(CheckpointReader(FileEnv::Default(), empty.path()).LoadLatest().status().code(), StatusCode::kNotFound);
}

TEST(CheckpointReaderTest, WorksWithoutIndexAndIgnoresTempDirectories) {
  ScratchDir dir;
  {
    CheckpointWriter writer(FileEnv::Default(), dir.path());
    ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  }
  const std::string ckpts = CheckpointsDir(dir.path());
  ASSERT_TRUE(FileEnv::Default()->RemoveFile(JoinPath(ckpts, kIndexFileName)).ok());
  ASSERT_TRUE(FileEnv::Default()->CreateDir(JoinPath(ckpts, ".tmp-ckpt-99-0123")).ok());
  ASSERT_TRUE(FileEnv::Default()->CreateDir(JoinPath(ckpts, "ckpt-50")).ok());  // empty: incomplete
  auto found = FindLatestCheckpoint(dir.path());
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->step, 10);
  EXPECT_EQ(CompleteSteps(dir.path()), (std::vector<int64_t>{10}));
  // A new writer cleans up the stray temp directory.
  CheckpointWriter writer(FileEnv::Default(), dir.path(), {.keep_checkpoints = 5});
  ASSERT_TRUE(writer.Write(TestModel(60).Contents()).ok());
  EXPECT_EQ(Entries(ckpts),
            (std::vector<std::string>{"checkpoint", "ckpt-10", "ckpt-50", "ckpt-60"}));
}

}  // namespace
}  // namespace mirrored

namespace mirrored {
namespace {

TEST(CheckpointReaderTest, CorruptIndexIsIgnoredAndRewritten) {
  ScratchDir dir;
  {
    CheckpointWriter writer(FileEnv::Default(), dir.path());
    ASSERT_TRUE(writer.Write(TestModel(10).Contents()).ok());
  }
  const std::string index_path = JoinPath(CheckpointsDir(dir.path()), kIndexFileName);
  std::ofstream(index_path, std::ios::trunc) << "{\"latest\": \"ckpt-1";  // cut short
  EXPECT_EQ(CheckpointIndex::Read(FileEnv::Default(), dir.path()).status().code(),
            StatusCode::kDataLoss);
  auto found = FindLatestCheckpoint(dir.path());
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->step, 10);
  CheckpointWriter writer(FileEnv::Default(), dir.path());
  ASSERT_TRUE(writer.Write(TestModel(20).Contents()).ok());
  auto index = CheckpointIndex::Read(FileEnv::Default(), dir.path());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, (CheckpointIndex{20, {10, 20}, {}}));
}

}  // namespace
}  // namespace mirrored
