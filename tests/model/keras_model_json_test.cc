// The Keras model JSON reader on models saved by real tf_keras (Keras 2) and
// Keras 3 (tests/model/keras/make_fixtures.py wrote them; expected.json holds
// what Keras itself says of each: input, outputs, parameter counts): each
// reads, builds into a model whose tensors add up to Keras' counts, and
// trains a step; refused models name the file, the layer, its class and the
// field.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "tests/model/random_batch.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/keras_model_json.h"
#include "worker/model/model_choice.h"

namespace mirrored::model {
namespace {

const std::string kFixtures = std::string(MIRRORED_SOURCE_DIR) + "/tests/model/keras/";

std::string Fixture(const std::string& name) { return kFixtures + name + ".json"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Accepted {
  std::string file;
  int adds;  // Add layers (graph joins)
};

class KerasModelJsonAccepts : public ::testing::TestWithParam<Accepted> {};

TEST_P(KerasModelJsonAccepts, ReadsBuildsAndMatchesKerasCounts) {
  const Accepted& c = GetParam();
  const nlohmann::json expected = nlohmann::json::parse(ReadText(kFixtures + "expected.json"))[c.file];
  StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(Fixture(c.file));
  ASSERT_TRUE(m.ok()) << m.status();
  const Shape3 input{expected["input"][0], expected["input"][1], expected["input"].size() > 2 ? int(expected["input"][2]) : 1};
  EXPECT_EQ(m->input_shape(), input);
  EXPECT_EQ(m->outputs(), expected["outputs"].get<int>());
  int adds = 0;
  for (const LayerSpec& s : m->layers()) adds += s.kind == LayerKind::kAdd;
  EXPECT_EQ(adds, c.adds);
  EXPECT_TRUE(m->CheckFits(input, m->outputs()).ok());

  StatusOr<ModelChoice> choice = ModelChoice::FromFlags("cnn", Fixture(c.file));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->name(), "keras:" + m->name());
  StatusOr<std::unique_ptr<Model>> model = choice->Create(MakeCpuBackend(), 3, input, m->outputs());
  ASSERT_TRUE(model.ok()) << model.status();
  size_t trainable = 0, state = 0;
  for (const TensorInfo& t : (*model)->store().trainable()) trainable += t.size;
  for (const TensorInfo& t : (*model)->store().state()) state += t.size;
  EXPECT_EQ(trainable, expected["trainable"].get<size_t>());
  EXPECT_EQ(state, expected["non_trainable"].get<size_t>());
  EXPECT_EQ(m->parameters(), trainable + state);  // the count the size cap uses, before building
  EXPECT_EQ((*model)->store().trainable().size(), expected["tensors"].get<size_t>());

  // A training step runs and reports every gradient once.
  const int n = 4;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  RandomBatch batch{std::vector<float>(size_t(n) * input.size()), std::vector<int32_t>(size_t(n))};
  for (float& v : batch.images) v = u(rng);
  for (int32_t& v : batch.labels) v = int32_t(rng() % uint32_t(m->outputs()));
  (*model)->Forward(n, batch.images.data(), batch.labels.data(), true);
  for (float l : (*model)->losses()) EXPECT_TRUE(std::isfinite(l));
  std::vector<float> weights(n, 1.f / n);
  int ready = 0;
  (*model)->Backward(weights.data(), [&](int) { ++ready; });
  EXPECT_EQ(ready, int((*model)->store().trainable().size()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KerasModelJsonAccepts,
                         ::testing::Values(Accepted{"tf_keras_sequential_cnn", 0}, Accepted{"keras3_sequential_cnn", 0},
                                           Accepted{"tf_keras_functional_resnet", 2},
                                           Accepted{"keras3_functional_resnet", 2}, Accepted{"tf_keras_mlp", 0},
                                           Accepted{"keras3_mlp", 0}, Accepted{"tf_keras_residual_no_bn", 1},
                                           Accepted{"keras3_residual_no_bn", 1},
                                           Accepted{"tf_keras_same_padding_conv", 0},
                                           Accepted{"keras3_same_padding_conv", 0}),
                         [](const auto& info) { return info.param.file; });

TEST(KerasModelJson, Keras2AndKeras3ReadTheSameLayers) {
  for (const std::string model : {"sequential_cnn", "functional_resnet", "mlp", "residual_no_bn", "same_padding_conv"}) {
    StatusOr<KerasModelJson> a = KerasModelJson::ReadFile(Fixture("tf_keras_" + model));
    StatusOr<KerasModelJson> b = KerasModelJson::ReadFile(Fixture("keras3_" + model));
    ASSERT_TRUE(a.ok() && b.ok()) << model;
    ASSERT_EQ(a->layers().size(), b->layers().size()) << model;
    for (size_t i = 0; i < a->layers().size(); ++i) {
      const LayerSpec &x = a->layers()[i], &y = b->layers()[i];
      EXPECT_EQ(int(x.kind), int(y.kind)) << model << " " << x.name;
      EXPECT_EQ(x.inputs, y.inputs) << model << " " << x.name;
      EXPECT_EQ(x.units, y.units) << model << " " << x.name;
      EXPECT_EQ(x.kernel, y.kernel) << model << " " << x.name;
      EXPECT_EQ(x.stride, y.stride) << model << " " << x.name;
      EXPECT_EQ(x.same_padding, y.same_padding) << model << " " << x.name;
      EXPECT_EQ(x.relu, y.relu) << model << " " << x.name;
      EXPECT_EQ(x.bias, y.bias) << model << " " << x.name;
    }
  }
}

// An Add whose only reader is a ReLU is one graph node (both in one pass).
TEST(KerasModelJson, AnAddReadOnlyByAReluBecomesOneGraphNode) {
  StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(Fixture("keras3_functional_resnet"));
  ASSERT_TRUE(m.ok()) << m.status();
  int joined = 0;
  for (const LayerSpec& s : m->layers()) {
    const int in = s.inputs[0];
    const bool after_add = in != LayerGraph::kGraphInput && m->layers()[size_t(in)].kind == LayerKind::kAdd;
    if (s.kind == LayerKind::kRelu && after_add) ++joined;
  }
  EXPECT_EQ(joined, 2);  // block1_out, block2_out
  EXPECT_EQ(m->BuildGraph()->size(), int(m->layers().size()) - joined);
}

TEST(KerasModelJson, ReadsWhatTheFixturesSay) {
  StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(Fixture("keras3_sequential_cnn"));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->layers().size(), 10u);  // the final softmax is the loss's
  const LayerSpec& rescale = m->layers()[0];
  EXPECT_EQ(rescale.kind, LayerKind::kRescaling);
  EXPECT_FLOAT_EQ(rescale.scale, 2.f);
  EXPECT_FLOAT_EQ(rescale.offset, -1.f);
  const LayerSpec& conv = m->layers()[3];
  EXPECT_EQ(conv.kind, LayerKind::kConv2D);
  EXPECT_EQ(conv.stride, 2);
  EXPECT_FALSE(conv.same_padding);
  EXPECT_TRUE(conv.relu);
  EXPECT_EQ(m->layers()[4].kind, LayerKind::kAvgPool2D);
  EXPECT_EQ(m->layers()[7].kind, LayerKind::kDropout);
  EXPECT_FLOAT_EQ(m->layers()[7].rate, 0.25f);
  EXPECT_FALSE(m->layers()[9].relu);  // softmax dropped
}

struct Refused {
  std::string file;
  std::vector<std::string> says;  // each must appear in the message
};

class KerasModelJsonRefuses : public ::testing::TestWithParam<Refused> {};

TEST_P(KerasModelJsonRefuses, NamesTheFileLayerClassAndField) {
  const Refused& c = GetParam();
  StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(Fixture(c.file));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  const std::string message = m.status().message();
  EXPECT_NE(message.find(Fixture(c.file)), std::string::npos) << message;
  for (const std::string& s : c.says) EXPECT_NE(message.find(s), std::string::npos) << s << " in: " << message;
}

std::vector<Refused> RefusedCases() {
  std::vector<Refused> cases;
  for (const std::string k : {"tf_keras", "keras3"}) {
    cases.push_back({k + "_refused_unknown_layer", {"(DepthwiseConv2D) is not supported", "mirrored reads", "Conv2D"}});
    cases.push_back({k + "_refused_dilated_conv", {"(Conv2D)", "\"dilation_rate\" is [2,2]", "supports [1, 1]"}});
    cases.push_back({k + "_refused_tanh_dense", {"(Dense)", "\"activation\" is \"tanh\"", "\"relu\""}});
    cases.push_back({k + "_refused_dense_no_bias", {"(Dense)", "\"use_bias\" is false"}});
    cases.push_back({k + "_refused_orthogonal_init", {"(Dense)", "\"kernel_initializer\" is Orthogonal", "GlorotUniform"}});
    cases.push_back({k + "_refused_l2_regularizer", {"(Dense)", "\"kernel_regularizer\"", "none (null)"}});
    cases.push_back({k + "_refused_same_max_pool", {"(MaxPooling2D)", "\"padding\" is \"same\"", "\"valid\""}});
    cases.push_back({k + "_refused_dense_on_image", {"(Dense)", "32x32x3", "Flatten"}});
  }
  cases.push_back({"keras3_refused_synchronized_batch_norm", {"(BatchNormalization)", "\"synchronized\" is true"}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KerasModelJsonRefuses, ::testing::ValuesIn(RefusedCases()),
                         [](const auto& info) { return info.param.file; });

TEST(KerasModelJson, RefusesMalformedJsonNamingTheFile) {
  const std::string text = ReadText(Fixture("keras3_mlp"));
  StatusOr<KerasModelJson> m = KerasModelJson::Parse(text.substr(0, text.size() / 2), "cut.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("cut.json: not valid JSON"), std::string::npos) << m.status();

  // 100 000 nested objects (600 KB): refused before nlohmann recurses into it.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(100000, '}');
  m = KerasModelJson::Parse(deep, "deep.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ExitCodeFor(m.status()), 2) << m.status();
  EXPECT_NE(m.status().message().find("deep.json: nests more than 512 levels deep (at byte 2560)"), std::string::npos)
      << m.status();

  m = KerasModelJson::Parse(R"({"class_name": "Sequential"})", "empty.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("empty.json: not a Keras model"), std::string::npos) << m.status();

  m = KerasModelJson::Parse(R"({"class_name": "MyModel", "config": {"layers": []}})", "sub.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model class \"MyModel\""), std::string::npos) << m.status();

  StatusOr<KerasModelJson> missing = KerasModelJson::ReadFile("/nonexistent/model.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.json"), std::string::npos);
}

// The Sequential CNN fixture, changed by `edit` (its "layers" as Keras wrote them).
StatusOr<KerasModelJson> EditedSequential(const std::function<void(nlohmann::json& layers)>& edit) {
  nlohmann::json j = nlohmann::json::parse(ReadText(Fixture("keras3_sequential_cnn")));
  edit(j["config"]["layers"]);
  return KerasModelJson::Parse(j.dump(), "edited.json");
}

void ExpectRefused(const StatusOr<KerasModelJson>& m, const std::string& message) {
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ExitCodeFor(m.status()), 2) << m.status();
  EXPECT_NE(m.status().message().find("edited.json: " + message), std::string::npos) << m.status();
}

// Two layers of one name would write one tensor name twice at the first
// checkpoint, after the training: refused as Keras refuses it, at the start.
TEST(KerasModelJson, SequentialLayersOfOneNameAreRefused) {
  ExpectRefused(EditedSequential([](nlohmann::json& l) { l[10]["config"]["name"] = "dense"; }),
                "layer \"dense\" (Dense): a second layer of that name");
  ExpectRefused(EditedSequential([](nlohmann::json& l) { l[3]["config"]["name"] = "conv2d"; }),
                "layer \"conv2d\" (MaxPooling2D): a second layer of that name");
}

// A 3 KB JSON must not make every replica allocate gigabytes: the model's
// size is checked before anything is built.
TEST(KerasModelJson, ModelsPastTheSizeCapsAreRefusedNamingTheLayer) {
  // 288 inputs x 1 000 000 units, and the convolutions': 289 M parameters.
  ExpectRefused(EditedSequential([](nlohmann::json& l) { l[9]["config"]["units"] = 1000000; }),
                "layer \"dense\" (Dense) brings the model to 289005216 parameters, more than the 268435456 "
                "(2^28, 1 GiB in FP32) mirrored builds");
  // 30x30 x 100 000 filters: 90 M values for one example.
  ExpectRefused(EditedSequential([](nlohmann::json& l) { l[2]["config"]["filters"] = 100000; }),
                "layer \"conv2d\" (Conv2D) brings one example's activations to");
  EXPECT_TRUE(EditedSequential([](nlohmann::json& l) { l[9]["config"]["units"] = 4096; }).ok());
}

TEST(KerasModelJson, NamesWithControlBytesOrOfHugeLengthAreRefused) {
  ExpectRefused(EditedSequential([](nlohmann::json& l) { l[9]["config"]["name"] = "d\x1b[31m\nFAKE: ok"; }),
                "a layer's \"name\" \"d\\u001b[31m\\nFAKE: ok\" holds a control character");
  ExpectRefused(EditedSequential([](nlohmann::json& l) { l[9]["config"]["name"] = std::string(100000, 'n'); }),
                "a layer's \"name\" of 100000 bytes");
}

TEST(KerasModelJson, ReadFileRefusesFilesThatAreNotRegular) {
  for (const std::string& path : {std::string("/dev/zero"), std::string(MIRRORED_SOURCE_DIR)}) {
    StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(path);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("--model-json " + path + ": not a regular file"), std::string::npos)
        << m.status();
  }
}

TEST(KerasModelJson, ShapeMismatchNamesBothShapes) {
  StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(Fixture("tf_keras_functional_resnet"));
  ASSERT_TRUE(m.ok()) << m.status();
  Status s = m->CheckFits({28, 28, 1}, 10);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const std::string& part : {Fixture("tf_keras_functional_resnet"), std::string("32x32x3 inputs"),
                                  std::string("7 class logits"), std::string("28x28x1 images in 10 classes")})
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " in: " << s.message();
  EXPECT_EQ(m->CheckFits({32, 32, 3}, 10).code(), StatusCode::kInvalidArgument);  // classes alone
  EXPECT_TRUE(m->CheckFits({32, 32, 3}, 0).ok());  // class count not known yet
}

TEST(KerasModelJson, RecordedJsonRebuildsTheSameModel) {
  StatusOr<ModelChoice> given = ModelChoice::FromFlags("cnn", Fixture("keras3_functional_resnet"));
  ASSERT_TRUE(given.ok()) << given.status();
  // What state.json holds, written and read back as text.
  const nlohmann::json back = nlohmann::json::parse(given->RecordedJson().dump(2));
  StatusOr<ModelChoice> recorded = ModelChoice::FromRecorded(given->name(), back, "ckpt-4/state.json");
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_TRUE(recorded->SameModel(*given));
  EXPECT_FALSE(ModelChoice::Zoo("resnet").SameModel(*given));
  auto a = given->Create(MakeCpuBackend(), 9, {32, 32, 3}, 7);
  auto b = recorded->Create(MakeCpuBackend(), 9, {32, 32, 3}, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->store().DownloadParams(), (*b)->store().DownloadParams());
  EXPECT_FALSE(ModelChoice::FromRecorded("keras:x", nlohmann::json(), "state.json").ok());
}

}  // namespace
}  // namespace mirrored::model
