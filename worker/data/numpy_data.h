// A labelled image set saved with NumPy, in the layout Keras'
// datasets.*.load_data() returns: x_train, y_train, x_test, y_test, either
// as one .npz (np.savez(path, x_train=..., ...)) or as a directory of
// x_train.npy, y_train.npy, x_test.npy, y_test.npy. Images are uint8
// (value / 255) or float32 (as they are), N x H x W or N x H x W x C;
// labels of any integer dtype, N or N x 1, or (--loss mse) targets of any
// number dtype, N or N x K (regression: shape().regression). The pixels stay in the mapped
// file (the workers of a machine share its pages); the labels become int32.
// The class count is the largest training label + 1.
//
//   StatusOr<NumpyData> d = NumpyData::Load("cifar.npz", /*with_train=*/true, /*with_test=*/true);
//   d->train().height();  d->classes();
//   StatusOr<ImageSetShape> s = NumpyData::CheckFiles("cifar.npz", true, true);   // headers only
#pragma once

#include <string>

#include "common/status.h"
#include "worker/data/dataset.h"
#include "worker/data/image_set_shape.h"

namespace mirrored::data {

class NumpyData {
 public:
  // Whether `path` names NumPy data: an existing .npz file, or a directory
  // holding x_train.npy or x_test.npy.
  static bool IsNumpyPath(const std::string& path);

  // Loads the training split (`with_train`) and the test split
  // (`with_test`). The class count always comes from y_train (read even
  // when only the test split is loaded), and every test label must be below
  // it. Errors (NotFound for a missing file, else InvalidArgument, exit 2)
  // name the file, the member and what is wrong: a missing member, a
  // malformed or truncated array, a dtype or shape that is not an image set,
  // x and y counts that differ, a negative label, train and test images of
  // other shapes or dtypes, a compressed .npz.
  // `float_targets` (--loss mse): y holds targets of any number dtype, N
  // or N x K, read as floats (shape().regression, classes = K).
  static StatusOr<NumpyData> Load(const std::string& path, bool with_train, bool with_test,
                                  bool float_targets = false);

  // Load's checks that need only the headers (milliseconds, whatever the
  // size): members there, dtypes, shapes, counts. `classes` is 0.
  static StatusOr<ImageSetShape> CheckFiles(const std::string& path, bool with_train, bool with_test,
                                            bool float_targets = false);

  const Dataset& train() const { return train_; }
  const Dataset& test() const { return test_; }
  const ImageSetShape& shape() const { return shape_; }

 private:
  static StatusOr<NumpyData> LoadTargets(const std::string& path, bool with_train, bool with_test);

  Dataset train_;
  Dataset test_;
  ImageSetShape shape_;
};

}  // namespace mirrored::data
