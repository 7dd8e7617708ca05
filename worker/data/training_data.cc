#include "worker/data/training_data.h"

#include "worker/data/fashion_mnist.h"
#include "worker/data/idx_data.h"
#include "worker/data/numpy_data.h"

namespace mirrored::data {
namespace {

constexpr ImageSetShape kFashionMnistShape{.height = 28, .width = 28, .channels = 1,
                                           .classes = FashionMnist::kNumClasses};

// IDX label files hold class indices (uint8): no targets to regress.
Status NoFloatTargets(const std::string& path, const DataOptions& options) {
  if (!options.float_targets) return OkStatus();
  return InvalidArgumentError("--data " + path + ": IDX files hold class labels, not float targets: --loss mse "
                              "needs NumPy (.npz, .npy) or TFRecord data");
}

}  // namespace

StatusOr<TrainingData> TrainingData::Load(const std::string& path, bool with_test, const DataOptions& options) {
  return LoadSplits(path, /*with_train=*/true, with_test, options);
}

StatusOr<TrainingData> TrainingData::LoadTest(const std::string& path, const DataOptions& options) {
  return LoadSplits(path, /*with_train=*/false, /*with_test=*/true, options);
}

StatusOr<TrainingData> TrainingData::LoadSplits(const std::string& path, bool with_train, bool with_test,
                                                const DataOptions& options) {
  TrainingData d;
  auto take = [&d](const auto& f) {
    d.train_ = f.train();
    d.test_ = f.test();
    d.shape_ = f.shape();
    return d;
  };
  if (NumpyData::IsNumpyPath(path)) {
    MIRRORED_ASSIGN_OR_RETURN(NumpyData n, NumpyData::Load(path, with_train, with_test, options.float_targets));
    return take(n);
  }
  if (TfRecordData::IsTfRecordPath(path)) {
    MIRRORED_ASSIGN_OR_RETURN(TfRecordData t, TfRecordData::Load(path, with_train, with_test, options));
    return take(t);
  }
  MIRRORED_RETURN_IF_ERROR(NoFloatTargets(path, options));
  if (!IdxData::IsFashionMnistLayout(path)) {
    MIRRORED_ASSIGN_OR_RETURN(IdxData x, IdxData::Load(path, with_train, with_test));
    return take(x);
  }
  MIRRORED_ASSIGN_OR_RETURN(FashionMnist f, with_train ? FashionMnist::Load(path, with_test)
                                                       : FashionMnist::LoadTest(path));
  d.train_ = f.train();
  d.test_ = f.test();
  d.shape_ = kFashionMnistShape;
  return d;
}

StatusOr<ImageSetShape> TrainingData::CheckFiles(const std::string& path, bool with_test, const DataOptions& options) {
  return CheckSplits(path, /*with_train=*/true, with_test, options);
}

StatusOr<ImageSetShape> TrainingData::CheckTestFiles(const std::string& path, const DataOptions& options) {
  return CheckSplits(path, /*with_train=*/false, /*with_test=*/true, options);
}

StatusOr<ImageSetShape> TrainingData::CheckSplits(const std::string& path, bool with_train, bool with_test,
                                                  const DataOptions& options) {
  if (NumpyData::IsNumpyPath(path)) return NumpyData::CheckFiles(path, with_train, with_test, options.float_targets);
  if (TfRecordData::IsTfRecordPath(path)) return TfRecordData::CheckFiles(path, with_train, with_test, options);
  MIRRORED_RETURN_IF_ERROR(NoFloatTargets(path, options));
  if (!IdxData::IsFashionMnistLayout(path)) return IdxData::CheckFiles(path, with_train, with_test);
  MIRRORED_RETURN_IF_ERROR(with_train ? FashionMnist::CheckFiles(path, with_test) : FashionMnist::CheckTestFiles(path));
  return kFashionMnistShape;
}

}  // namespace mirrored::data
