#include "worker/data/fashion_mnist.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "worker/data/idx_cache.h"
#include "worker/data/idx_file.h"

namespace mirrored::data {

StatusOr<Dataset> FashionMnist::LoadSplit(const std::string& images_path, const std::string& labels_path,
                                          const IdxCacheOptions& cache) {
  MIRRORED_ASSIGN_OR_RETURN(IdxFile images, ReadIdxCached(images_path, cache));
  MIRRORED_ASSIGN_OR_RETURN(IdxFile labels, ReadIdxCached(labels_path, cache));
  if (images.dims().size() != 3) {
    return InvalidArgumentError(images_path + ": expected an image file (3 dimensions, magic 0x00000803), found " +
                                std::to_string(images.dims().size()) + " dimension(s)");
  }
  if (images.dims()[1] != 28 || images.dims()[2] != 28) {
    return InvalidArgumentError(images_path + ": images are " + std::to_string(images.dims()[1]) + "x" +
                                std::to_string(images.dims()[2]) + ", expected 28x28");
  }
  if (labels.dims().size() != 1) {
    return InvalidArgumentError(labels_path + ": expected a label file (1 dimension, magic 0x00000801), found " +
                                std::to_string(labels.dims().size()) + " dimensions");
  }
  if (images.dims()[0] != labels.dims()[0]) {
    return InvalidArgumentError(images_path + " holds " + std::to_string(images.dims()[0]) + " images but " +
                                labels_path + " holds " + std::to_string(labels.dims()[0]) +
                                " labels; the counts must match");
  }
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
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    if (!with_test && std::string_view(name).starts_with("t10k")) continue;
    const std::string path = dir + "/" + name;
    if (::access(path.c_str(), R_OK) == 0) continue;
    if (errno == ENOENT || errno == ENOTDIR) {
      return NotFoundError(path + ": no such file (install Debian's dataset-fashion-mnist or pass --data DIR)");
    }
    return PermissionDeniedError(path + ": " + std::strerror(errno));
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

}  // namespace mirrored::data
