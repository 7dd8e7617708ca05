// The zoo's Keras JSON builds the zoo's model (the same tensors, the same
// logits), ExportKeras writes what the model holds, as a pair that replaces
// the previous one whole whatever file operation fails, and --export's
// ExportCheckpoint reads checkpoints, refusing damaged ones (exit 2).
#include "worker/export/keras_export.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/run_dir/checkpoint_index.h"
#include "tests/export/h5_reader.h"
#include "tests/util/fault_injecting_file_env.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/model_checkpoint.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/keras_zoo_json.h"
#include "worker/model/optimizer.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;
using model::KerasZooModel;
using nlohmann::json;

std::string TempDir() {
  std::string path = ::testing::TempDir() + "/export-XXXXXX";
  EXPECT_NE(mkdtemp(path.data()), nullptr);
  return path;
}

std::unique_ptr<model::Model> Create(const model::ModelChoice& choice, model::Shape3 input, int classes,
                                     uint64_t seed) {
  auto m = choice.Create(model::MakeCpuBackend(), seed, input, classes);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<float> Random(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Copies every tensor of `to` from the `from` tensor it maps to.
void CopyTensors(const std::vector<model::TensorInfo>& to_list, const std::vector<model::TensorInfo>& from_list,
                 const std::map<std::string, std::string>& prefix, const std::vector<float>& from,
                 std::vector<float>& to) {
  for (const auto& t : to_list) {
    const size_t slash = t.name.rfind('/');
    const std::string name = prefix.at(t.name.substr(0, slash)) + t.name.substr(slash);
    auto it = std::find_if(from_list.begin(), from_list.end(), [&](const auto& f) { return f.name == name; });
    ASSERT_NE(it, from_list.end()) << "the zoo model has no " << name;
    ASSERT_EQ(it->shape, t.shape) << name;
    std::copy_n(from.begin() + it->offset, t.size, to.begin() + t.offset);
  }
}

class ZooKerasJsonTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooKerasJsonTest, MirroredReadsItBackAsTheZooModel) {
  const model::Shape3 input{12, 12, 2};
  const int classes = 3;
  auto zoo = Create(model::ModelChoice::Zoo(GetParam()), input, classes, 7);
  StatusOr<KerasZooModel> keras = KerasZooModel::Build(GetParam(), input, classes);
  ASSERT_TRUE(keras.ok()) << keras.status();
  StatusOr<model::ModelChoice> choice = model::ModelChoice::FromRecorded("keras:" + GetParam(), keras->json, "zoo");
  ASSERT_TRUE(choice.ok()) << choice.status();
  auto from_json = Create(*choice, input, classes, 1);
  ASSERT_TRUE(zoo && from_json);
  auto& zs = zoo->store();
  auto& ks = from_json->store();
  ASSERT_EQ(ks.trainable().size(), zs.trainable().size());
  ASSERT_EQ(ks.state().size(), zs.state().size());
  // BatchNorm statistics away from their initial 0 and 1, so inference uses them.
  if (zs.state_size() > 0) ASSERT_TRUE(zs.UploadState(Random(zs.state_size(), 3, 0.5f, 1.5f)).ok());
  std::vector<float> params(ks.params_size()), state(ks.state_size());
  CopyTensors(ks.trainable(), zs.trainable(), keras->tensor_prefix, zs.DownloadParams(), params);
  CopyTensors(ks.state(), zs.state(), keras->tensor_prefix, zs.DownloadState(), state);
  ASSERT_TRUE(ks.UploadParams(params).ok());
  if (ks.state_size() > 0) ASSERT_TRUE(ks.UploadState(state).ok());
  const int n = 4;
  const std::vector<float> images = Random(size_t(n) * input.size(), 9, 0.f, 1.f);
  const std::vector<int32_t> labels(n, 0);
  zoo->Forward(n, images.data(), labels.data(), false);
  from_json->Forward(n, images.data(), labels.data(), false);
  ASSERT_EQ(zoo->logits().size(), from_json->logits().size());
  for (size_t i = 0; i < zoo->logits().size(); ++i)
    EXPECT_NEAR(from_json->logits()[i], zoo->logits()[i], 1e-5f * (1 + std::abs(zoo->logits()[i]))) << i;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooKerasJsonTest, ::testing::Values("mlp", "cnn", "resnet"));

TEST(ExportKerasTest, WritesTheStoresTensorsInKerasGroupsAndTheJson) {
  const std::string dir = TempDir() + "/export";  // made by the export
  const model::ModelChoice cnn = model::ModelChoice::Zoo("cnn");
  auto model = Create(cnn, {28, 28, 1}, 10, 5);
  StatusOr<KerasExport> e = ExportKeras(FileEnv::Default(), cnn, *model, dir);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->weight_layers, 4);
  EXPECT_EQ(e->weights_path, dir + "/model.weights.h5");
  H5Reader r(e->weights_path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.Children("layers"), (std::vector<std::string>{"conv2d", "conv2d_1", "dense", "dense_1"}));
  const auto& store = model->store();
  const std::vector<float> params = store.DownloadParams();
  const struct {
    const char* h5;
    const char* tensor;
  } expected[] = {{"layers/conv2d/vars/0", "conv1/kernel"}, {"layers/conv2d_1/vars/1", "conv2/bias"},
                  {"layers/dense/vars/0", "dense1/kernel"}, {"layers/dense_1/vars/1", "dense2/bias"}};
  for (const auto& x : expected) {
    const auto& t = store.trainable()[size_t(store.FindTrainable(x.tensor))];
    std::vector<int64_t> shape;
    const std::vector<float> values = r.Floats(x.h5, &shape);
    EXPECT_EQ(shape, t.shape) << x.h5;
    EXPECT_EQ(values, std::vector<float>(params.begin() + t.offset, params.begin() + t.offset + t.size)) << x.h5;
  }
  std::ifstream in(e->json_path);
  const json written = json::parse(in);
  EXPECT_EQ(written, KerasZooModel::Build("cnn", {28, 28, 1}, 10)->json);
  for (const auto& entry : fs::directory_iterator(dir))  // no temporary file left
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp-", 0), std::string::npos) << entry.path();
}

// Every entry of `dir` (a file name -> its bytes); {} when `dir` is missing.
std::map<std::string, std::string> ReadDir(const std::string& dir) {
  std::map<std::string, std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The siblings an export leaves beside its directory (none when it ends).
std::vector<std::string> TempSiblings(const std::string& parent) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(parent))
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0) names.push_back(entry.path().filename().string());
  return names;
}

TEST(ExportKerasTest, ReplacesAPreviousExportWhole) {
  const std::string parent = TempDir(), dir = parent + "/export";
  fs::create_directory(dir);
  WriteText(dir + "/model.json", "{\"stale\": true}");
  WriteText(dir + "/model.weights.h5", "stale");
  WriteText(dir + "/.tmp-model.json-0123456789abcdef", "what a crashed earlier version left");
  const model::ModelChoice cnn = model::ModelChoice::Zoo("cnn");
  auto model = Create(cnn, {10, 10, 1}, 3, 5);
  StatusOr<KerasExport> e = ExportKeras(FileEnv::Default(), cnn, *model, dir);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::map<std::string, std::string> files = ReadDir(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(json::parse(files.at("model.json")), KerasZooModel::Build("cnn", {10, 10, 1}, 3)->json);
  EXPECT_NE(files.at("model.weights.h5"), "stale");
  EXPECT_EQ(TempSiblings(parent), std::vector<std::string>{});
}

TEST(ExportKerasTest, RefusesToReplaceADirectoryOfOtherFiles) {
  const std::string dir = TempDir();  // e.g. --export-dir ~/models
  WriteText(dir + "/notes.txt", "mine");
  const model::ModelChoice cnn = model::ModelChoice::Zoo("cnn");
  auto model = Create(cnn, {10, 10, 1}, 3, 5);
  StatusOr<KerasExport> e = ExportKeras(FileEnv::Default(), cnn, *model, dir);
  ASSERT_EQ(e.status().code(), StatusCode::kInvalidArgument) << e.status();
  EXPECT_NE(e.status().message().find("notes.txt"), std::string::npos) << e.status();
  EXPECT_EQ(ReadDir(dir), (std::map<std::string, std::string>{{"notes.txt", "mine"}}));
}

// A directory under an export file's name is the user's: replacing the
// export directory whole would delete what it holds.
TEST(ExportKerasTest, RefusesADirectoryUnderAnExportFilesName) {
  const std::string dir = TempDir();
  fs::create_directories(dir + "/model.json/sub");
  WriteText(dir + "/model.json/precious.txt", "mine");
  const model::ModelChoice cnn = model::ModelChoice::Zoo("cnn");
  auto model = Create(cnn, {10, 10, 1}, 3, 5);
  StatusOr<KerasExport> e = ExportKeras(FileEnv::Default(), cnn, *model, dir);
  ASSERT_EQ(e.status().code(), StatusCode::kInvalidArgument) << e.status();
  EXPECT_NE(e.status().message().find("holds a directory \"model.json\""), std::string::npos) << e.status();
  EXPECT_TRUE(fs::exists(dir + "/model.json/precious.txt"));
  EXPECT_TRUE(fs::is_directory(dir + "/model.json/sub"));
}

// Whichever file operation fails, or "crashes" (what was not fsynced is
// then lost), RUN_DIR/export holds the previous pair or the new pair:
// never a new model.json beside old weights, nor one file alone.
TEST(ExportKerasTest, AFailureAtAnyFileOperationLeavesTheOldPairOrTheNewOne) {
  using Mode = FaultInjectingFileEnv::Mode;
  // Another model before (another JSON and other weights): a mix shows.
  const model::ModelChoice mlp = model::ModelChoice::Zoo("mlp"), cnn = model::ModelChoice::Zoo("cnn");
  auto old_model = Create(mlp, {10, 10, 1}, 3, 1), new_model = Create(cnn, {10, 10, 1}, 3, 2);
  const std::string pristine = TempDir() + "/export";
  ASSERT_TRUE(ExportKeras(FileEnv::Default(), mlp, *old_model, pristine).ok());
  const std::map<std::string, std::string> old_files = ReadDir(pristine);
  std::map<std::string, std::string> new_files;
  int64_t operations = 0;
  {
    const std::string dir = TempDir() + "/export";
    fs::copy(pristine, dir, fs::copy_options::recursive);
    FaultInjectingFileEnv env(FileEnv::Default());
    ASSERT_TRUE(ExportKeras(&env, cnn, *new_model, dir).ok());
    operations = env.operation_count();
    new_files = ReadDir(dir);
  }
  ASSERT_EQ(old_files.size(), 2u);
  ASSERT_NE(old_files.at("model.json"), new_files.at("model.json"));
  ASSERT_NE(old_files.at("model.weights.h5"), new_files.at("model.weights.h5"));
  ASSERT_GT(operations, 8);
  for (Mode mode : {Mode::kFail, Mode::kCrash}) {
    for (int64_t n = 0; n < operations; ++n) {
      SCOPED_TRACE((mode == Mode::kFail ? "fail" : "crash") + std::string(" at operation ") + std::to_string(n));
      const std::string parent = TempDir(), dir = parent + "/export";
      fs::copy(pristine, dir, fs::copy_options::recursive);
      FaultInjectingFileEnv env(FileEnv::Default());
      env.InjectFault(mode, n);
      const Status written = ExportKeras(&env, cnn, *new_model, dir).status();
      if (mode == Mode::kCrash) ASSERT_TRUE(env.DropUnsyncedState().ok());
      const std::map<std::string, std::string> found = ReadDir(dir);
      EXPECT_TRUE(found == old_files || found == new_files) << "export/ holds a mix: " << written;
      if (mode == Mode::kFail && found == old_files) {
        EXPECT_FALSE(written.ok()) << "the export said it wrote the new pair";
      }
    }
  }
}

// A Keras model with BatchNormalization and a Conv2D without bias, as a
// checkpoint of a --model-json run records it.
const json kBatchNormModel = json::parse(R"({"class_name": "Sequential", "config": {"name": "bn_net", "layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8, 8, 1], "name": "in"}},
  {"class_name": "Conv2D", "config": {"name": "conv", "filters": 4, "kernel_size": [3, 3], "use_bias": false}},
  {"class_name": "BatchNormalization", "config": {"name": "bn", "momentum": 0.9, "epsilon": 0.01}},
  {"class_name": "ReLU", "config": {"name": "relu"}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})");

// RUN_DIR/checkpoints/ckpt-<step> of `choice`'s model, written as the chief does.
std::unique_ptr<model::Model> WriteCheckpoint(const std::string& run_dir, const model::ModelChoice& choice,
                                              model::Shape3 input, int classes, int64_t step) {
  auto model = Create(choice, input, classes, 11);
  if (model->store().state_size() > 0)
    EXPECT_TRUE(model->store().UploadState(Random(model->store().state_size(), 4, 0.5f, 1.5f)).ok());
  auto adam = model::Optimizer::Create("adam", 1e-3f);
  (*adam)->Bind(&model->store(), &model->backend());
  CheckpointState st;
  st.step = step;
  st.model = choice.name();
  st.model_json = choice.RecordedJson();
  st.data_shape = {input.h, input.w, input.c};
  st.classes = classes;
  st.optimizer = "adam";
  st.final = true;
  CheckpointWriter writer(FileEnv::Default(), run_dir);
  EXPECT_TRUE(writer.Write(ModelSnapshot::Take(*model, **adam).Contents(st)).ok());
  return model;
}

TEST(ExportCheckpointTest, AKerasModelsCheckpointGoesToItsRunDirsExport) {
  const std::string run = TempDir();
  StatusOr<model::ModelChoice> choice = model::ModelChoice::FromRecorded("keras:bn_net", kBatchNormModel, "test");
  ASSERT_TRUE(choice.ok()) << choice.status();
  auto model = WriteCheckpoint(run, *choice, {8, 8, 1}, 3, 5);
  StatusOr<KerasExport> e = ExportCheckpoint(FileEnv::Default(), run + "/checkpoints/ckpt-5", "");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->step, 5);
  EXPECT_EQ(e->weights_path, run + "/export/model.weights.h5");
  H5Reader r(e->weights_path);
  EXPECT_EQ(r.Children("layers/conv2d/vars"), (std::vector<std::string>{"0"}));  // use_bias=False
  EXPECT_EQ(r.Children("layers/batch_normalization/vars"), (std::vector<std::string>{"0", "1", "2", "3"}));
  const auto& store = model->store();
  const std::vector<float> state = store.DownloadState();
  const auto& variance = store.state()[size_t(store.FindState("bn/moving_variance"))];
  std::vector<int64_t> shape;
  EXPECT_EQ(r.Floats("layers/batch_normalization/vars/3", &shape),
            std::vector<float>(state.begin() + variance.offset, state.begin() + variance.offset + variance.size));
  std::ifstream in(e->json_path);
  EXPECT_EQ(json::parse(in), kBatchNormModel);  // as the user gave it, the softmax included
}

TEST(ExportCheckpointTest, ARunDirectoryGivesItsLatestCheckpoint) {
  const std::string run = TempDir();
  WriteCheckpoint(run, model::ModelChoice::Zoo("mlp"), {28, 28, 1}, 10, 3);
  WriteCheckpoint(run, model::ModelChoice::Zoo("mlp"), {28, 28, 1}, 10, 9);
  StatusOr<KerasExport> e = ExportCheckpoint(FileEnv::Default(), run, "");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->step, 9);
  EXPECT_TRUE(fs::exists(run + "/export/model.json"));
}

TEST(ExportCheckpointTest, ACopyOutsideARunDirectoryNeedsExportDir) {
  const std::string run = TempDir(), elsewhere = TempDir();
  WriteCheckpoint(run, model::ModelChoice::Zoo("mlp"), {28, 28, 1}, 10, 4);
  fs::copy(run + "/checkpoints/ckpt-4", elsewhere + "/ckpt-4");
  StatusOr<KerasExport> e = ExportCheckpoint(FileEnv::Default(), elsewhere + "/ckpt-4", "");
  ASSERT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("--export-dir"), std::string::npos) << e.status();
  e = ExportCheckpoint(FileEnv::Default(), elsewhere + "/ckpt-4", elsewhere + "/out");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(fs::exists(elsewhere + "/out/model.weights.h5"));
}

TEST(ExportCheckpointTest, ADamagedCheckpointIsExit2NamingTheFile) {
  const std::string run = TempDir();
  WriteCheckpoint(run, model::ModelChoice::Zoo("mlp"), {28, 28, 1}, 10, 2);
  const std::string file = run + "/checkpoints/ckpt-2/model.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    const char byte = static_cast<char>(f.get() ^ 0xff);
    f.seekp(-5, std::ios::end);
    f.put(byte);
  }
  StatusOr<KerasExport> e = ExportCheckpoint(FileEnv::Default(), run + "/checkpoints/ckpt-2", "");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(ExitCodeFor(e.status()), kExitUsage) << e.status();
  EXPECT_NE(e.status().message().find(file), std::string::npos) << e.status();
  EXPECT_FALSE(fs::exists(run + "/export"));
}

TEST(ExportCheckpointTest, NotACheckpointIsExit2NamingIt) {
  const std::string dir = TempDir();
  StatusOr<KerasExport> e = ExportCheckpoint(FileEnv::Default(), dir, "");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(ExitCodeFor(e.status()), kExitUsage) << e.status();
  EXPECT_NE(e.status().message().find(dir), std::string::npos) << e.status();
  e = ExportCheckpoint(FileEnv::Default(), dir + "/checkpoints/ckpt-7", "");  // no such checkpoint
  EXPECT_EQ(ExitCodeFor(e.status()), kExitUsage) << e.status();
}

}  // namespace
}  // namespace mirrored
