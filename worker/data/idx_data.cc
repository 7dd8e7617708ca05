#include "worker/data/idx_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "worker/data/idx_file.h"

namespace mirrored::data {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

struct SplitFiles {
  std::string images, labels;
};

// The first of `names` (each tried gzipped, then plain) that `dir` holds; "" if none.
std::string FirstPresent(const std::string& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    for (const char* suffix : {".gz", ""}) {
      const std::string path = dir + "/" + name + suffix;
      if (IsRegularFile(path)) return path;
    }
  }
  return "";
}

constexpr const char* kNamesLookedFor =
    "looked for {train,t10k,test}-images-idx{3,4}-{ubyte,float}[.gz] and {train,t10k,test}-labels-idx1-ubyte[.gz]";

// The image and label files of one split: "train", else "t10k" or "test".
StatusOr<SplitFiles> FindSplit(const std::string& dir, bool test) {
  const std::vector<std::string> prefixes = test ? std::vector<std::string>{"t10k", "test"}
                                                 : std::vector<std::string>{"train"};
  for (const std::string& p : prefixes) {
    SplitFiles f{FirstPresent(dir, {p + "-images-idx3-ubyte", p + "-images-idx4-ubyte", p + "-images-idx3-float",
                                    p + "-images-idx4-float"}),
                 FirstPresent(dir, {p + "-labels-idx1-ubyte"})};
    if (f.images.empty() && f.labels.empty()) continue;
    if (f.images.empty()) {
      return NotFoundError(dir + "/" + p + "-images-idx3-ubyte.gz: no such file (" + f.labels +
                           " is there; " + kNamesLookedFor + ")");
    }
    if (f.labels.empty()) {
      return NotFoundError(dir + "/" + p + "-labels-idx1-ubyte.gz: no such file (" + f.images +
                           " is there; " + kNamesLookedFor + ")");
    }
    return f;
  }
  return NotFoundError(dir + "/" + prefixes.front() + "-images-idx3-ubyte.gz: no such file (" + kNamesLookedFor +
                       ")");
}

StatusOr<ImageSetShape> SplitShape(const SplitFiles& f, const std::vector<uint32_t>& images,
                                   const std::vector<uint32_t>& labels) {
  if (images.size() != 3 && images.size() != 4) {
    return InvalidArgumentError(f.images + ": expected an image file (N x H x W or N x H x W x C: 3 or 4 "
                                "dimensions), found " + std::to_string(images.size()) + " dimension(s)");
  }
  if (labels.size() != 1) {
    return InvalidArgumentError(f.labels + ": expected a label file (1 dimension, magic 0x00000801), found " +
                                std::to_string(labels.size()) + " dimensions");
  }
  if (images[0] != labels[0]) {
    return InvalidArgumentError(f.images + " holds " + std::to_string(images[0]) + " images but " + f.labels +
                                " holds " + std::to_string(labels[0]) + " labels; the counts must match");
  }
  const uint32_t c = images.size() == 4 ? images[3] : 1;
  if (images[1] > INT_MAX || images[2] > INT_MAX || c > INT_MAX) {
    return InvalidArgumentError(f.images + ": an image of " + std::to_string(images[1]) + "x" +
                                std::to_string(images[2]) + "x" + std::to_string(c) + " is too large");
  }
  return ImageSetShape{.height = int(images[1]), .width = int(images[2]), .channels = int(c)};
}

struct Split {
  SplitFiles files;
  IdxFile images, labels;
  ImageSetShape shape;
};

StatusOr<Split> ReadSplit(const std::string& dir, bool test, const IdxCacheOptions& cache) {
  MIRRORED_ASSIGN_OR_RETURN(SplitFiles f, FindSplit(dir, test));
  IdxCacheOptions with_floats = cache;
  with_floats.accept_float32 = true;
  MIRRORED_ASSIGN_OR_RETURN(IdxFile images, ReadIdxCached(f.images, with_floats));
  MIRRORED_ASSIGN_OR_RETURN(IdxFile labels, ReadIdxCached(f.labels, cache));
  MIRRORED_ASSIGN_OR_RETURN(ImageSetShape shape, SplitShape(f, images.dims(), labels.dims()));
  return Split{std::move(f), std::move(images), std::move(labels), shape};
}

Status CheckSameImages(const Split& train, const Split& test) {
  const ImageSetShape &a = train.shape, &b = test.shape;
  if (a.height != b.height || a.width != b.width || a.channels != b.channels) {
    return InvalidArgumentError(test.files.images + ": images are " + b.ImageString() + ", but " +
                                train.files.images + "'s are " + a.ImageString() + "; the splits must have one shape");
  }
  if (train.images.float32() != test.images.float32()) {
    return InvalidArgumentError(test.files.images + ": " + (test.images.float32() ? "float32" : "uint8") +
                                " values, but " + train.files.images + "'s are " +
                                (train.images.float32() ? "float32" : "uint8") +
                                " (uint8 is scaled by 1/255, float32 is not): write both alike");
  }
  return OkStatus();
}

// The labels as int32, each below `below` (0: any).
StatusOr<std::vector<int32_t>> ReadLabels(const Split& s, int below) {
  std::vector<int32_t> out(s.labels.data().size());
  for (size_t i = 0; i < out.size(); ++i) {
    const int v = s.labels.data()[i];
    if (below > 0 && v >= below) {
      return InvalidArgumentError(s.files.labels + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                                  " is not a class of the training labels (0 to " + std::to_string(below - 1) + ")");
    }
    out[i] = v;
  }
  return out;
}

Dataset MakeDataset(const Split& s, std::vector<int32_t> labels) {
  const ImageSetShape& sh = s.shape;
  if (s.images.float32()) {
    return Dataset::Float32BigEndianIn(sh.height, sh.width, sh.channels, s.images.region(), s.images.data(),
                                       std::move(labels));
  }
  return Dataset(sh.height, sh.width, sh.channels, s.images.region(), s.images.data(), 1.0f / 255.0f,
                 std::move(labels));
}

}  // namespace

bool IdxData::IsFashionMnistLayout(const std::string& dir) {
  for (const char* name : {"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"}) {
    const std::string path = dir + "/" + name;
    if (!IsRegularFile(path)) continue;
    StatusOr<std::vector<uint32_t>> dims = IdxFile::ReadHeader(path);
    // A damaged file: Fashion-MNIST's reader names the problem.
    return !dims.ok() || (dims->size() == 3 && (*dims)[1] == 28 && (*dims)[2] == 28);
  }
  return !FindSplit(dir, /*test=*/false).ok() && !FindSplit(dir, /*test=*/true).ok();
}

StatusOr<ImageSetShape> IdxData::CheckFiles(const std::string& dir, bool with_train, bool with_test) {
  (void)with_train;  // the training labels give the class count: an evaluator needs them too
  ImageSetShape shape;
  for (bool test : {false, true}) {
    if (test && !with_test) break;
    MIRRORED_ASSIGN_OR_RETURN(SplitFiles f, FindSplit(dir, test));
    MIRRORED_ASSIGN_OR_RETURN(std::vector<uint32_t> images, IdxFile::ReadHeader(f.images, /*accept_float32=*/true));
    MIRRORED_ASSIGN_OR_RETURN(std::vector<uint32_t> labels, IdxFile::ReadHeader(f.labels));
    MIRRORED_ASSIGN_OR_RETURN(ImageSetShape s, SplitShape(f, images, labels));
    if (!test) shape = s;
    if (test && (s.height != shape.height || s.width != shape.width || s.channels != shape.channels)) {
      return InvalidArgumentError(f.images + ": images are " + s.ImageString() + ", but the training images are " +
                                  shape.ImageString() + "; the splits must have one shape");
    }
  }
  return shape;
}

StatusOr<IdxData> IdxData::Load(const std::string& dir, bool with_train, bool with_test,
                                const IdxCacheOptions& cache) {
  MIRRORED_ASSIGN_OR_RETURN(Split train, ReadSplit(dir, /*test=*/false, cache));
  MIRRORED_ASSIGN_OR_RETURN(std::vector<int32_t> y_train, ReadLabels(train, 0));
  IdxData d;
  d.shape_ = train.shape;
  d.shape_.classes = y_train.empty() ? 0 : *std::max_element(y_train.begin(), y_train.end()) + 1;
  if (with_test) {
    MIRRORED_ASSIGN_OR_RETURN(Split test, ReadSplit(dir, /*test=*/true, cache));
    MIRRORED_RETURN_IF_ERROR(CheckSameImages(train, test));
    MIRRORED_ASSIGN_OR_RETURN(std::vector<int32_t> y_test, ReadLabels(test, d.shape_.classes));
    d.test_ = MakeDataset(test, std::move(y_test));
  }
  if (with_train) d.train_ = MakeDataset(train, std::move(y_train));
  return d;
}

}  // namespace mirrored::data
