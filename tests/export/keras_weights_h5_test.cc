// The Keras weights file's bytes (keras_weights_h5.h) read back with the
// HDF5 C API, and where each layer's weights go (keras_weights_layout.h).
#include "worker/export/keras_weights_h5.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/export/h5_reader.h"
#include "worker/export/keras_weights_layout.h"

namespace mirrored {
namespace {

using nlohmann::json;

std::string WriteTemp(const std::string& bytes) {
  std::string path = ::testing::TempDir() + "/weights-XXXXXX";
  const int fd = mkstemp(path.data());
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(KerasWeightsH5Test, GroupsShapesAndValuesReadBack) {
  std::vector<float> kernel(6), bias{0.5f, -1.5f}, gamma{1, 2, 3};
  for (size_t i = 0; i < kernel.size(); ++i) kernel[i] = float(i) * 0.25f;
  const std::vector<KerasWeightsGroup> groups{
      {"layers/dense", "dense1", {{{3, 2}, kernel.data()}, {{2}, bias.data()}}},
      {"layers/batch_normalization_1", "stem_bn", {{{3}, gamma.data()}}}};
  StatusOr<std::string> bytes = EncodeKerasWeightsH5(groups, "export/model.weights.h5");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_EQ(bytes->substr(0, 8), std::string("\x89HDF\r\n\x1a\n", 8));  // the HDF5 signature
  const std::string path = WriteTemp(*bytes);
  H5Reader r(path);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.Exists("vars"));  // the model's own (empty) group: load_weights opens it
  EXPECT_EQ(r.Children("layers"), (std::vector<std::string>{"batch_normalization_1", "dense"}));
  EXPECT_EQ(r.Children("layers/dense/vars"), (std::vector<std::string>{"0", "1"}));
  std::vector<int64_t> shape;
  EXPECT_EQ(r.Floats("layers/dense/vars/0", &shape), kernel);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(r.last_was_float32());
  EXPECT_EQ(r.Floats("layers/dense/vars/1", &shape), bias);
  EXPECT_EQ(shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.Floats("layers/batch_normalization_1/vars/0", &shape), gamma);
  EXPECT_EQ(r.StringAttribute("layers/dense/vars", "name"), "dense1");
  EXPECT_EQ(r.StringAttribute("layers/batch_normalization_1/vars", "name"), "stem_bn");
  unlink(path.c_str());
}

TEST(KerasWeightsH5Test, TwoEncodingsAreIndependent) {
  std::vector<float> a{1}, b{2};
  StatusOr<std::string> first = EncodeKerasWeightsH5({{"layers/dense", "d", {{{1}, a.data()}}}}, "a.weights.h5");
  StatusOr<std::string> second = EncodeKerasWeightsH5({{"layers/dense", "d", {{{1}, b.data()}}}}, "b.weights.h5");
  ASSERT_TRUE(first.ok() && second.ok());
  const std::string path = WriteTemp(*first);
  std::vector<int64_t> shape;
  EXPECT_EQ(H5Reader(path).Floats("layers/dense/vars/0", &shape), a);
  unlink(path.c_str());
}

TEST(KerasWeightsH5Test, ObjectsRecordNoTimeSoTheSameWeightsGiveTheSameBytes) {
  // HDF5 stamps every object with the time by default: an export of the
  // same checkpoint again (mirrored-worker --export) would differ.
  std::vector<float> a{1, 2, 3};
  StatusOr<std::string> bytes = EncodeKerasWeightsH5({{"layers/dense", "d", {{{3}, a.data()}}}}, "a.weights.h5");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string path = WriteTemp(*bytes);
  H5Reader r(path);
  for (const char* object : {"vars", "layers", "layers/dense", "layers/dense/vars", "layers/dense/vars/0"})
    EXPECT_EQ(r.ModificationTime(object), 0) << object;
  unlink(path.c_str());
}

TEST(KerasWeightsH5Test, AGroupTwiceIsAnErrorNamingTheFileAndGroup) {
  std::vector<float> a{1};
  StatusOr<std::string> bytes = EncodeKerasWeightsH5(
      {{"layers/dense", "d", {{{1}, a.data()}}}, {"layers/dense", "e", {{{1}, a.data()}}}}, "x/model.weights.h5");
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("x/model.weights.h5"), std::string::npos) << bytes.status();
  EXPECT_NE(bytes.status().message().find("layers/dense/vars"), std::string::npos) << bytes.status();
}

TEST(KerasSnakeCaseTest, AsKerasNamesItsGroups) {
  EXPECT_EQ(KerasSnakeCase("Dense"), "dense");
  EXPECT_EQ(KerasSnakeCase("Conv2D"), "conv2d");
  EXPECT_EQ(KerasSnakeCase("BatchNormalization"), "batch_normalization");
  EXPECT_EQ(KerasSnakeCase("GlobalAveragePooling2D"), "global_average_pooling2d");
  EXPECT_EQ(KerasSnakeCase("InputLayer"), "input_layer");
  EXPECT_EQ(KerasSnakeCase("ReLU"), "re_lu");
}

json Layer(const std::string& cls, const std::string& name, json config = json::object()) {
  config["name"] = name;
  return {{"class_name", cls}, {"config", config}, {"name", name}};
}

TEST(KerasWeightsLayoutTest, CountsEachClassInModelOrder) {
  const json model{{"class_name", "Functional"},
                   {"config",
                    {{"layers",
                      {Layer("InputLayer", "in"), Layer("Conv2D", "c1"), Layer("BatchNormalization", "bn"),
                       Layer("ReLU", "r"), Layer("Conv2D", "c2", {{"use_bias", false}}), Layer("Flatten", "f"),
                       Layer("Dense", "out")}}}}};
  StatusOr<std::vector<KerasLayerWeights>> l = KerasWeightsLayout(model, {{"bn", "stem/bn"}});
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 4u);
  EXPECT_EQ((*l)[0].group, "layers/conv2d");
  EXPECT_EQ((*l)[0].tensors, (std::vector<std::string>{"c1/kernel", "c1/bias"}));
  EXPECT_EQ((*l)[1].group, "layers/batch_normalization");
  EXPECT_EQ((*l)[1].tensors, (std::vector<std::string>{"stem/bn/gamma", "stem/bn/beta", "stem/bn/moving_mean",
                                                       "stem/bn/moving_variance"}));
  EXPECT_EQ((*l)[2].group, "layers/conv2d_1");
  EXPECT_EQ((*l)[2].tensors, (std::vector<std::string>{"c2/kernel"}));
  EXPECT_EQ((*l)[3].group, "layers/dense");
  EXPECT_EQ((*l)[3].layer_name, "out");
}

TEST(KerasWeightsLayoutTest, ASequentialModelsInputLayerIsNotALayer) {
  const json model{{"class_name", "Sequential"},
                   {"config", {{"layers", {Layer("InputLayer", "in"), Layer("Dense", "a"), Layer("Dense", "b")}}}}};
  StatusOr<std::vector<KerasLayerWeights>> l = KerasWeightsLayout(model, {});
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].group, "layers/dense");
  EXPECT_EQ((*l)[1].group, "layers/dense_1");
}

TEST(KerasWeightsLayoutTest, NotAModelIsRefused) {
  EXPECT_FALSE(KerasWeightsLayout(json{{"class_name", "Sequential"}}, {}).ok());
  EXPECT_FALSE(KerasWeightsLayout(json{{"config", {{"layers", {json{{"config", json::object()}}}}}}}, {}).ok());
}

}  // namespace
}  // namespace mirrored
