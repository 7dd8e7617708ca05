#include "worker/data/training_data.h"

#include "worker/data/fashion_mnist.h"

namespace mirrored::data {
namespace {

constexpr ImageSetShape kFashionMnistShape{.height = 28, .width = 28, .channels = 1,
                                           .classes = FashionMnist::kNumClasses};

}  // namespace

StatusOr<TrainingData> TrainingData::Load(const std::string& path, bool with_test) {
  TrainingData d;
  if (NumpyData::IsNumpyPath(path)) {
    MIRRORED_ASSIGN_OR_RETURN(NumpyData n, NumpyData::Load(path, /*with_train=*/true, with_test));
    d.train_ = n.train();
    d.test_ = n.test();
    d.shape_ = n.shape();
    return d;
  }
  MIRRORED_ASSIGN_OR_RETURN(FashionMnist f, FashionMnist::Load(path, with_test));
  d.train_ = f.train();
  d.test_ = f.test();
  d.shape_ = kFashionMnistShape;
  return d;
}

StatusOr<TrainingData> TrainingData::LoadTest(const std::string& path) {
  TrainingData d;
  if (NumpyData::IsNumpyPath(path)) {
    MIRRORED_ASSIGN_OR_RETURN(NumpyData n, NumpyData::Load(path, /*with_train=*/false, /*with_test=*/true));
    d.test_ = n.test();
    d.shape_ = n.shape();
    return d;
  }
  MIRRORED_ASSIGN_OR_RETURN(FashionMnist f, FashionMnist::LoadTest(path));
  d.test_ = f.test();
  d.shape_ = kFashionMnistShape;
  return d;
}

StatusOr<ImageSetShape> TrainingData::CheckFiles(const std::string& path, bool with_test) {
  if (NumpyData::IsNumpyPath(path)) return NumpyData::CheckFiles(path, /*with_train=*/true, with_test);
  MIRRORED_RETURN_IF_ERROR(FashionMnist::CheckFiles(path, with_test));
  return kFashionMnistShape;
}

StatusOr<ImageSetShape> TrainingData::CheckTestFiles(const std::string& path) {
  if (NumpyData::IsNumpyPath(path)) return NumpyData::CheckFiles(path, /*with_train=*/false, /*with_test=*/true);
  MIRRORED_RETURN_IF_ERROR(FashionMnist::CheckTestFiles(path));
  return kFashionMnistShape;
}

}  // namespace mirrored::data
