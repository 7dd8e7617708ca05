#include "common/run_dir/checkpoint_state.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "checkpoint_test_util.h"
#include "common/run_dir/checkpoint_index.h"
#include "common/run_dir/posix_file_env.h"
#include "worker/checkpoint/evaluator_lease.h"

namespace mirrored {
namespace {

CheckpointState Sample() {
  CheckpointState s;
  s.step = 600;
  s.epoch = 2;
  s.step_in_epoch = 131;
  s.seed = 1;
  s.data_seed = 2;
  s.world_size = 4;
  s.num_workers = 2;
  s.global_batch_size = 256;
  s.model = "cnn";
  s.optimizer = "sgd";
  s.final = true;
  s.mirrored_version = "0.1.0";
  s.wall_time = 1.7e9;
  s.files["model.safetensors"] = {1077808, 0x93bb0896u};
  s.files["optimizer.safetensors"] = {12, 0x0000000fu};
  return s;
}

TEST(CheckpointStateTest, JsonRoundTrip) {
  auto back = CheckpointState::FromJsonText(Sample().ToJson().dump(), "state.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Sample());
}

TEST(CheckpointStateTest, DigestsAreWrittenAsHexAndOptional) {
  nlohmann::json j = Sample().ToJson();
  EXPECT_EQ(j["files"]["model.safetensors"]["crc32c"], "93bb0896");
  EXPECT_EQ(j["files"]["optimizer.safetensors"]["crc32c"], "0000000f");
  j.erase("files");  // a checkpoint of an earlier version
  auto back = CheckpointState::FromJson(j, "state.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->files.empty());
}

// --precision fp16 records its loss scale; an earlier version's state (no
// precision, no scale) reads as fp32 without one; tensors are FP32 in every
// precision, so nothing else differs.
TEST(CheckpointStateTest, PrecisionAndLossScaleRoundTripAndAreOptional) {
  CheckpointState st = Sample();
  st.precision = "fp16";
  st.loss_scale = 16384;
  st.loss_scale_good_steps = 1500;
  auto back = CheckpointState::FromJsonText(st.ToJson().dump(), "state.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, st);
  const nlohmann::json plain = Sample().ToJson();
  EXPECT_FALSE(plain.contains("loss_scale"));
  EXPECT_FALSE(plain.contains("precision"));
  auto old = CheckpointState::FromJson(plain, "state.json");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->loss_scale, 0);
  EXPECT_EQ(old->precision, "");
  nlohmann::json bad = st.ToJson();
  bad["loss_scale"] = -2;
  EXPECT_FALSE(CheckpointState::FromJson(bad, "state.json").ok());
  bad["loss_scale"] = "big";
  EXPECT_FALSE(CheckpointState::FromJson(bad, "state.json").ok());
}

TEST(CheckpointStateTest, UnknownKeysAreIgnored) {
  nlohmann::json j = Sample().ToJson();
  j["from_the_future"] = 1;
  auto back = CheckpointState::FromJson(j, "state.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Sample());  // the known fields as written
}

TEST(CheckpointStateTest, RejectsBadFields) {
  auto expect_bad = [](auto edit, const std::string& needle) {
    nlohmann::json j = Sample().ToJson();
    edit(j);
    auto s = CheckpointState::FromJson(j, "dir/state.json");
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(s.status().message().find("dir/state.json"), std::string::npos) << s.status();
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  };
  expect_bad([](nlohmann::json& j) { j.erase("step"); }, "step");
  expect_bad([](nlohmann::json& j) { j["step"] = "6"; }, "step");
  expect_bad([](nlohmann::json& j) { j["step"] = -1; }, "step");
  expect_bad([](nlohmann::json& j) { j["world_size"] = 0; }, "world_size");
  expect_bad([](nlohmann::json& j) { j["model"] = ""; }, "model");
  expect_bad([](nlohmann::json& j) { j["final"] = 1; }, "final");
  expect_bad([](nlohmann::json& j) { j["format_version"] = 99; }, "format_version");
  expect_bad([](nlohmann::json& j) { j["files"]["model.safetensors"]["crc32c"] = "93bb08"; }, "model.safetensors");
  expect_bad([](nlohmann::json& j) { j["files"]["model.safetensors"]["bytes"] = -1; }, "model.safetensors");
  expect_bad([](nlohmann::json& j) { j["files"] = 3; }, "files");
  EXPECT_EQ(CheckpointState::FromJsonText("{\"step\":", "s").status().code(),
            StatusCode::kDataLoss);
  // A forged model_json 100 000 arrays deep, which nlohmann's recursion
  // would overflow the stack on, is refused before it is parsed.
  const std::string deep = "{\"model_json\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto refused = CheckpointState::FromJsonText(deep, "ckpt-2/state.json");
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("ckpt-2/state.json: nests more than 512 levels deep"), std::string::npos)
      << refused.status();
}

TEST(CheckpointIndexTest, NamesAndJson) {
  EXPECT_EQ(CheckpointDirName(600), "ckpt-600");
  EXPECT_EQ(ParseCheckpointDirName("ckpt-600"), 600);
  EXPECT_EQ(ParseCheckpointDirName("ckpt-0"), 0);
  EXPECT_FALSE(ParseCheckpointDirName("ckpt-06"));
  EXPECT_FALSE(ParseCheckpointDirName("ckpt-"));
  EXPECT_FALSE(ParseCheckpointDirName("ckpt-6x"));
  EXPECT_FALSE(ParseCheckpointDirName(".tmp-ckpt-6-abc"));
  CheckpointIndex index{600, {400, 600}, {}};
  auto back = CheckpointIndex::FromJsonText(index.ToJsonText(), "checkpoint");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, index);
  EXPECT_EQ(index.ToJsonText().find("pruned"), std::string::npos) << "absent when empty, as before it existed";
  CheckpointIndex with_pruned{600, {400, 600}, {100, 200}};
  EXPECT_NE(with_pruned.ToJsonText().find(R"("pruned": [)"), std::string::npos) << with_pruned.ToJsonText();
  back = CheckpointIndex::FromJsonText(with_pruned.ToJsonText(), "checkpoint");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, with_pruned);
  // Advisory: a malformed list reads as empty, the rest of the index stands.
  for (const char* text : {R"({"latest": "ckpt-2", "kept": ["ckpt-2"], "pruned": "ckpt-1"})",
                           R"({"latest": "ckpt-2", "kept": ["ckpt-2"], "pruned": ["ckpt-1", "ckpt-x"]})"}) {
    auto odd = CheckpointIndex::FromJsonText(text, "checkpoint");
    ASSERT_TRUE(odd.ok()) << odd.status();
    EXPECT_EQ(*odd, (CheckpointIndex{2, {2}, {}})) << text;
  }
  EXPECT_EQ(CheckpointIndex::FromJsonText("{\"latest\": \"x\", \"kept\": []}", "c").status().code(),
            StatusCode::kDataLoss);
}

// A checkpoint skipped for good (damaged on two looks) is released without
// being recorded as evaluated: the progress stays where the last evaluation
// left it, and the chief keeps the skipped one as part of the backlog only.
TEST(EvaluatorLeaseTest, ReleaseFreesTheSkippedCheckpointWithoutProgress) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  ASSERT_TRUE(EvaluatorLease::Follow(env, dir.path()).ok());
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 20).ok());
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 30).ok());
  ASSERT_TRUE(EvaluatorLease::Release(env, dir.path(), 10).ok());
  EXPECT_EQ(EvaluatorLease::Read(env, dir.path())->reading, 30) << "another step's release frees nothing";
  ASSERT_TRUE(EvaluatorLease::Release(env, dir.path(), 30).ok());
  auto released = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->reading);
  EXPECT_EQ(released->last_evaluated_step, 20) << "a skipped step is not recorded as evaluated";
  EXPECT_TRUE(released->following);
  EXPECT_TRUE(released->Protects(30)) << "in the backlog, for an evaluator started again";
}

TEST(EvaluatorLeaseTest, AcquireAndMarkEvaluated) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  ASSERT_TRUE(env->CreateDir(CheckpointsDir(dir.path())).ok());
  auto none = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->reading);
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 400).ok());
  auto held = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->reading, 400);
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 400).ok());
  auto done = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->reading);
  EXPECT_EQ(done->last_evaluated_step, 400);
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 600).ok());
  EXPECT_EQ(EvaluatorLease::Read(env, dir.path())->last_evaluated_step, 400) << "progress kept";
  EXPECT_TRUE(EvaluatorLease::Read(env, dir.path())->following) << "only a following evaluator acquires";
  ASSERT_TRUE(EvaluatorLease::Follow(env, dir.path()).ok());
  auto following = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(following.ok());
  EXPECT_TRUE(following->following);
  EXPECT_FALSE(following->reading) << "Follow reads nothing";
  EXPECT_EQ(following->last_evaluated_step, 400);
  EXPECT_TRUE(following->Protects(401));
  EXPECT_FALSE(following->Protects(400));
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 600).ok());
  EXPECT_TRUE(EvaluatorLease::Read(env, dir.path())->following) << "MarkEvaluated keeps following";
  ASSERT_TRUE(EvaluatorLease::Stop(env, dir.path()).ok());
  auto stopped = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(stopped.ok());
  EXPECT_FALSE(stopped->following);
  EXPECT_EQ(stopped->last_evaluated_step, 600);
  EXPECT_FALSE(stopped->Protects(601));
  // Stopped by a signal before its end: nothing read, the backlog kept.
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 800).ok());
  ASSERT_TRUE(EvaluatorLease::Pause(env, dir.path()).ok());
  auto paused = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE(paused->following);
  EXPECT_FALSE(paused->reading);
  EXPECT_EQ(paused->last_evaluated_step, 600);
  EXPECT_TRUE(paused->Protects(601));
  // A lease deleted (or damaged) while the evaluator follows: its next update
  // rewrites it as following, so the chief goes on keeping the backlog.
  ASSERT_TRUE(EvaluatorLease::Follow(env, dir.path()).ok());
  ASSERT_TRUE(env->RemoveFile(JoinPath(CheckpointsDir(dir.path()), kEvalLeaseFileName)).ok());
  ASSERT_TRUE(EvaluatorLease::Acquire(env, dir.path(), 700).ok());
  EXPECT_TRUE(EvaluatorLease::Read(env, dir.path())->following);
  ASSERT_TRUE(EvaluatorLease::MarkEvaluated(env, dir.path(), 700).ok());
  EXPECT_TRUE(EvaluatorLease::Read(env, dir.path())->Protects(701));
  ASSERT_TRUE(EvaluatorLease::Stop(env, dir.path()).ok());
  // No temp files left behind.
  auto names = env->ListDir(CheckpointsDir(dir.path()));
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{kEvalLeaseFileName});
}

TEST(EvaluatorLeaseTest, ReadsOlderAndDamagedLeases) {
  ScratchDir dir;
  FileEnv* env = FileEnv::Default();
  ASSERT_TRUE(env->CreateDir(CheckpointsDir(dir.path())).ok());
  const std::string path = JoinPath(CheckpointsDir(dir.path()), kEvalLeaseFileName);
  // Written before "following" existed: not following.
  ASSERT_TRUE(WriteFileAtomically(env, CheckpointsDir(dir.path()), kEvalLeaseFileName, R"({"reading":"ckpt-5","last_evaluated_step":3})", ".t-").ok());
  auto old = EvaluatorLease::Read(env, dir.path());
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->reading, 5);
  EXPECT_FALSE(old->following);
  EXPECT_TRUE(old->Protects(5));
  EXPECT_FALSE(old->Protects(4));
  ASSERT_TRUE(WriteFileAtomically(env, CheckpointsDir(dir.path()), kEvalLeaseFileName, R"({"reading":null,"following":"yes"})", ".t-").ok());
  auto bad = EvaluatorLease::Read(env, dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("\"following\""), std::string::npos) << bad.status();
}

// A write that meets a full disk says so, naming the directory and the
// space left, not only "No space left on device" (seen 6 times per job
// generation, with nothing else); still Internal: exit 1, retried by the
// launcher once space may be freed.
TEST(PosixFileEnvTest, AFullDiskIsSaidAsSuchWithTheSpaceLeft) {
  const std::string dir = ::testing::TempDir();
  const Status s = PosixError("write", dir + "/.tmp-ckpt-10-ab/optimizer.safetensors", ENOSPC);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("write " + dir + "/.tmp-ckpt-10-ab/optimizer.safetensors: the file system holding "),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find(" is full (No space left on device; "), std::string::npos) << s;
  EXPECT_NE(s.message().find(" free of "), std::string::npos) << s;
  EXPECT_EQ(PosixError("write", dir + "/x", EIO).message(), "write " + dir + "/x: Input/output error");
}

}  // namespace
}  // namespace mirrored
