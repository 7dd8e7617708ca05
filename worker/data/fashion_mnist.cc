#include "worker/data/fashion_mnist.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "worker/data/idx_cache.h"
#include "worker/data/idx_file.h"

namespace mirrored::data {

namespace {

// What makes a pair of IDX files a Fashion-MNIST split: 28x28 images, one
// label per image.
Status CheckSplitShapes(const std::string& images_path, const std::vector<uint32_t>& images,
                        const std::string& labels_path, const std::vector<uint32_t>& labels) {
  if (images.size() != 3) {
    return InvalidArgumentError(images_path + ": expected an image file (3 dimensions, magic 0x00000803), found " +
                                std::to_string(images.size()) + " dimension(s)");
  }
  if (images[1] != 28 || images[2] != 28) {
    return InvalidArgumentError(images_path + ": images are " + std::to_string(images[1]) + "x" +
                                std::to_string(images[2]) + ", expected 28x28");
  }
  if (labels.size() != 1) {
    return InvalidArgumentError(labels_path + ": expected a label file (1 dimension, magic 0x00000801), found " +
                                std::to_string(labels.size()) + " dimensions");
  }
  if (images[0] != labels[0]) {
    return InvalidArgumentError(images_path + " holds " + std::to_string(images[0]) + " images but " + labels_path +
                                " holds " + std::to_string(labels[0]) + " labels; the counts must match");
  }
  return OkStatus();
}

}  // namespace

StatusOr<Dataset> FashionMnist::LoadSplit(const std::string& images_path, const std::string& labels_path,
                                          const IdxCacheOptions& cache) {
  MIRRORED_ASSIGN_OR_RETURN(IdxFile images, ReadIdxCached(images_path, cache));
  MIRRORED_ASSIGN_OR_RETURN(IdxFile labels, ReadIdxCached(labels_path, cache));
  MIRRORED_RETURN_IF_ERROR(CheckSplitShapes(images_path, images.dims(), labels_path, labels.dims()));
  const size_t n = labels.dims()[0];
  std::vector<int32_t> y(n);
  for (size_t i = 0; i < n; ++i) {
    uint8_t v = labels.data()[i];
    if (v >= kNumClasses) {
      return InvalidArgumentError(labels_path + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                                  " is out of range [0, " + std::to_string(kNumClasses) + ")");
    }
    y[i] = v;
  }
  // Pixels stay bytes (in the shared cache entry when there is one) and
  // become floats in [0, 1] per batch.
  return Dataset(28, 28, 1, images.region(), images.data(), 1.0f / 255.0f, std::move(y));
}

Status FashionMnist::CheckFiles(const std::string& dir, bool with_test) {
  return CheckSplitFiles(dir, /*with_train=*/true, with_test);
}

Status FashionMnist::CheckTestFiles(const std::string& dir) {
  return CheckSplitFiles(dir, /*with_train=*/false, /*with_test=*/true);
}

Status FashionMnist::CheckSplitFiles(const std::string& dir, bool with_train, bool with_test) {
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    if (!with_test && std::string_view(name).starts_with("t10k")) continue;
    if (!with_train && std::string_view(name).starts_with("train")) continue;
    const std::string path = dir + "/" + name;
    if (::access(path.c_str(), R_OK) == 0) continue;
    if (errno == ENOENT || errno == ENOTDIR) {
      return NotFoundError(path + ": no such file (install Debian's dataset-fashion-mnist or pass --data DIR)");
    }
    return PermissionDeniedError(path + ": " + std::strerror(errno));
  }
  for (const char* split : {"train", "t10k"}) {
    if (!with_test && std::string_view(split) == "t10k") continue;
    if (!with_train && std::string_view(split) == "train") continue;
    const std::string images_path = dir + "/" + split + "-images-idx3-ubyte.gz";
    const std::string labels_path = dir + "/" + split + "-labels-idx1-ubyte.gz";
    MIRRORED_ASSIGN_OR_RETURN(std::vector<uint32_t> images, IdxFile::ReadHeader(images_path));
    MIRRORED_ASSIGN_OR_RETURN(std::vector<uint32_t> labels, IdxFile::ReadHeader(labels_path));
    MIRRORED_RETURN_IF_ERROR(CheckSplitShapes(images_path, images, labels_path, labels));
  }
  return OkStatus();
}

StatusOr<FashionMnist> FashionMnist::Load(const std::string& dir, bool with_test, const IdxCacheOptions& cache) {
  FashionMnist ds;
  MIRRORED_ASSIGN_OR_RETURN(ds.train_, LoadSplit(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz",
                                                 cache));
  if (!with_test) return ds;
  MIRRORED_ASSIGN_OR_RETURN(ds.test_, LoadSplit(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz",
                                                cache));
  return ds;
}

StatusOr<FashionMnist> FashionMnist::LoadTest(const std::string& dir, const IdxCacheOptions& cache) {
  FashionMnist ds;
  MIRRORED_ASSIGN_OR_RETURN(ds.test_, LoadSplit(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz",
                                                cache));
  return ds;
}

}  // namespace mirrored::data
