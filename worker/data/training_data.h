// What --data names, whatever its format: the training and test splits,
// the image shape and the class count a model is built for. A directory of
// IDX files (Fashion-MNIST's own: 28x28x1, 10 classes, fashion_mnist.h; any
// other shape: idx_data.h), an .npz or a directory of x_train.npy,
// y_train.npy, x_test.npy, y_test.npy (numpy_data.h), or a directory of
// train*.tfrecord and test*.tfrecord files (tfrecord_data.h).
//
//   StatusOr<TrainingData> d = TrainingData::Load(options.data_dir, /*with_test=*/options.validate);
//   model::Model::Create("cnn", backend, seed, {h, w, c}, d->shape().classes);
//   StatusOr<ImageSetShape> s = TrainingData::CheckFiles(dir, true);   // before joining a job
#pragma once

#include <string>

#include "common/status.h"
#include "worker/data/dataset.h"
#include "worker/data/image_set_shape.h"
#include "worker/data/tfrecord_data.h"

namespace mirrored::data {

class TrainingData {
 public:
  // The training split, and the test split when `with_test`. `options`: TFRecord feature names, float
  // targets. Errors: the format's (NotFound or
  // InvalidArgument, exit 2, naming the file).
  static StatusOr<TrainingData> Load(const std::string& path, bool with_test = true, const DataOptions& options = {});
  // The test split only (an evaluator); shape() is still the training
  // set's (its class count comes from the training labels).
  static StatusOr<TrainingData> LoadTest(const std::string& path, const DataOptions& options = {});

  // The checks of Load that take milliseconds (headers, a TFRecord set's
  // first records), for a task to fail before it joins a job. The class
  // count is 0 where it needs the labels read (all but Fashion-MNIST).
  static StatusOr<ImageSetShape> CheckFiles(const std::string& path, bool with_test = true,
                                            const DataOptions& options = {});
  static StatusOr<ImageSetShape> CheckTestFiles(const std::string& path, const DataOptions& options = {});

  const Dataset& train() const { return train_; }
  const Dataset& test() const { return test_; }
  const ImageSetShape& shape() const { return shape_; }

 private:
  static StatusOr<TrainingData> LoadSplits(const std::string& path, bool with_train, bool with_test,
                                           const DataOptions& options);
  static StatusOr<ImageSetShape> CheckSplits(const std::string& path, bool with_train, bool with_test,
                                             const DataOptions& options);

  Dataset train_;
  Dataset test_;
  ImageSetShape shape_;
};

}  // namespace mirrored::data
