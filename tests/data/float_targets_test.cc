// Float targets for --loss mse (DataOptions::float_targets): N x K targets
// from an .npz and from TFRecord float_list labels, gathered per batch as
// the trainer takes them; class labels are refused a float dtype without it,
// and IDX data has no targets.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/data/image_set_test_util.h"
#include "tests/data/npy_test_util.h"
#include "worker/data/training_data.h"

namespace mirrored::data {
namespace {

DataOptions Mse() {
  DataOptions o;
  o.float_targets = true;  // --loss mse
  return o;
}

class FloatTargetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-targets-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // x: n x 4 x 4 x 1 uint8; y: n x width float32 (i + k / 10).
  fs::path WriteNpz(size_t n_train, size_t n_test, size_t width, bool float64 = false) {
    auto targets = [&](size_t n) {
      std::vector<double> y(n * width);
      for (size_t i = 0; i < y.size(); ++i) y[i] = double(i / width) + double(i % width) / 10;
      return y;
    };
    auto y_npy = [&](size_t n) {
      const std::vector<size_t> shape = width == 1 ? std::vector<size_t>{n} : std::vector<size_t>{n, width};
      if (float64) return Npy<double>("<f8", shape, targets(n));
      const std::vector<double> d = targets(n);
      return Npy<float>("<f4", shape, std::vector<float>(d.begin(), d.end()));
    };
    const fs::path path = dir_ / "regression.npz";
    WriteBytes(path, Zip({{"x_train.npy", Synthetic(n_train, 4, 4, 1, 2).x},
                          {"y_train.npy", y_npy(n_train)},
                          {"x_test.npy", Synthetic(n_test, 4, 4, 1, 2).x},
                          {"y_test.npy", y_npy(n_test)}}));
    return path;
  }
  fs::path dir_;
};

TEST_F(FloatTargetsTest, NpzTargetsOfWidthTwo) {
  const fs::path npz = WriteNpz(10, 4, 2);
  const DataOptions mse = Mse();
  auto shape = TrainingData::CheckFiles(npz.string(), true, mse);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_TRUE(shape->regression);
  EXPECT_EQ(shape->classes, 2);
  auto d = TrainingData::Load(npz.string(), true, mse);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().String(), "4x4x1 images with 2 float targets");
  ASSERT_TRUE(d->train().has_targets());
  EXPECT_FLOAT_EQ(d->train().target(7, 1), 7.1f);
  std::vector<float> out(4);
  const std::vector<uint32_t> idx = {3, 1};
  d->test().GatherTargets(idx, out.data());
  EXPECT_EQ(out, (std::vector<float>{3.0f, 3.1f, 1.0f, 1.1f}));
  // Without --loss mse, float labels are refused, saying which flag takes them.
  EXPECT_NE(TrainingData::Load(npz.string()).status().message().find(
                "member y_train.npy: dtype float32 is not supported for labels: use an integer dtype (class "
                "indices), or --loss mse for float targets"),
            std::string::npos);
}

TEST_F(FloatTargetsTest, Float64TargetsOfWidthOneAndMismatchedWidths) {
  const fs::path npz = WriteNpz(6, 3, 1, /*float64=*/true);
  auto d = TrainingData::Load(npz.string(), true, Mse());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->shape().classes, 1);
  EXPECT_FLOAT_EQ(d->test().target(2, 0), 2.0f);
  WriteBytes(npz, Zip({{"x_train.npy", Synthetic(6, 4, 4, 1, 2).x},
                       {"y_train.npy", Npy<float>("<f4", {6, 2}, std::vector<float>(12, 1))},
                       {"x_test.npy", Synthetic(3, 4, 4, 1, 2).x},
                       {"y_test.npy", Npy<float>("<f4", {3, 3}, std::vector<float>(9, 1))}}));
  const Status s = TrainingData::Load(npz.string(), true, Mse()).status();
  EXPECT_EQ(ExitCodeFor(s), 2) << s;
  EXPECT_NE(s.message().find("member y_test.npy: shape (3, 3), but member y_train.npy's is (6, 2)"),
            std::string::npos) << s;
}

TEST_F(FloatTargetsTest, TfRecordFloatListTargets) {
  auto with_targets = [](size_t first, size_t n, size_t width) {
    std::vector<tensorflow::Example> out = ImageExamples(n, 6, 6, 3, 2, false, first);
    for (size_t i = 0; i < n; ++i) {
      auto& label = (*out[i].mutable_features()->mutable_feature())["label"];
      label.Clear();
      for (size_t k = 0; k < width; ++k) label.mutable_float_list()->add_value(float(first + i) + float(k) / 4);
    }
    return out;
  };
  WriteTfRecords(dir_ / "train.tfrecord", with_targets(0, 8, 3));
  WriteTfRecords(dir_ / "test.tfrecord", with_targets(0, 2, 3));
  const DataOptions mse = Mse();
  auto d = TrainingData::Load(dir_.string(), true, mse);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->shape().regression);
  EXPECT_EQ(d->shape().classes, 3);
  EXPECT_FLOAT_EQ(d->train().target(5, 2), 5.5f);
  const Status labels = TrainingData::Load(dir_.string()).status();
  EXPECT_NE(labels.message().find("is not one int64 (a class index: an int64_list of one value; float targets "
                                  "need --loss mse)"),
            std::string::npos) << labels;
  WriteTfRecords(dir_ / "test.tfrecord", with_targets(0, 2, 2));
  const Status widths = TrainingData::Load(dir_.string(), true, mse).status();
  EXPECT_NE(widths.message().find("test.tfrecord: record 0 at byte 0: 2 targets, but"), std::string::npos) << widths;
}

TEST_F(FloatTargetsTest, IdxDataHasNoTargets) {
  WriteIdxSplit(dir_, "train", 8, 8, 1, 2, 4);
  const Status s = TrainingData::Load(dir_.string(), false, Mse()).status();
  EXPECT_EQ(ExitCodeFor(s), 2) << s;
  EXPECT_NE(s.message().find("IDX files hold class labels, not float targets"), std::string::npos) << s;
}

}  // namespace
}  // namespace mirrored::data
