// A labelled image set in IDX files of any image shape, named the way
// MNIST and Fashion-MNIST name theirs, in one directory:
//   train-images-idx3-ubyte[.gz]   N x H x W uint8 (or idx4: N x H x W x C)
//   train-labels-idx1-ubyte[.gz]   N uint8 class indices
//   t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]   (or test-...)
// Images may be float32 instead (IDX type 0x0D, `-float` in the name:
// train-images-idx4-float.gz). uint8 pixels are scaled by 1/255, float32
// ones used as they are. The class count is the largest training label + 1.
// Decompressed files go through the machine's cache (idx_cache.h), so the
// workers of a machine share one mapped copy.
//
//   StatusOr<IdxData> d = IdxData::Load("data/", /*with_train=*/true, /*with_test=*/true);
//   d->train().height();  d->shape().classes;
//   StatusOr<ImageSetShape> s = IdxData::CheckFiles("data/", true, true);   // headers only
#pragma once

#include <string>

#include "common/status.h"
#include "worker/data/dataset.h"
#include "worker/data/idx_cache.h"
#include "worker/data/image_set_shape.h"

namespace mirrored::data {

class IdxData {
 public:
  // Whether `dir` holds Fashion-MNIST's own layout (the gzipped files,
  // 28x28 images; fashion_mnist.h reads it, with its 10 classes), or
  // no IDX files at all (fashion_mnist.h's errors name what is missing).
  static bool IsFashionMnistLayout(const std::string& dir);

  // Loads the splits asked for; the class count always comes from the
  // training labels (read even for the test split alone). Errors
  // (NotFound, InvalidArgument: exit 2) name the file and the problem: a
  // missing file (naming the names looked for), a wrong magic number, a
  // truncated file, an image file of other than 3 or 4 dimensions, image
  // and label counts that differ, splits of other image shapes or types, a
  // test label that is not a training class.
  static StatusOr<IdxData> Load(const std::string& dir, bool with_train, bool with_test,
                                const IdxCacheOptions& cache = {.dir = IdxCacheDir()});
  // Load's checks of the headers only (milliseconds); classes is 0.
  static StatusOr<ImageSetShape> CheckFiles(const std::string& dir, bool with_train, bool with_test);

  const Dataset& train() const { return train_; }
  const Dataset& test() const { return test_; }
  const ImageSetShape& shape() const { return shape_; }

 private:
  Dataset train_;
  Dataset test_;
  ImageSetShape shape_;
};

}  // namespace mirrored::data
