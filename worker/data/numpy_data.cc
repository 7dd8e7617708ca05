#include "worker/data/numpy_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>

#include "worker/data/npy_array.h"
#include "worker/data/npz_archive.h"

namespace mirrored::data {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The arrays of one source: members of an .npz, or files of a directory.
class ArraySource {
 public:
  static StatusOr<ArraySource> Open(const std::string& path) {
    ArraySource s;
    s.path_ = path;
    if (!IsDirectory(path)) {
      if (path.ends_with(".npy")) {
        return InvalidArgumentError("--data " + path + ": one .npy file; pass the directory holding x_train.npy, "
                                    "y_train.npy, x_test.npy and y_test.npy, or one .npz holding all four");
      }
      // Mapped lazily: an evaluator reads x_test, not x_train.
      MIRRORED_ASSIGN_OR_RETURN(NpzArchive z, NpzArchive::Open(path, /*populate=*/false));
      s.npz_.emplace(std::move(z));
    }
    return s;
  }
  // `load`: the values will be read (a directory's file is prefaulted, an
  // archive member's CRC checked); else only the header is.
  StatusOr<NpyArray> Get(const std::string& array, bool load) const {
    if (npz_) return npz_->Member(array, /*verify_crc=*/load);
    return NpyArray::Read(path_ + "/" + array + ".npy", /*populate=*/load);
  }

 private:
  std::string path_;
  std::optional<NpzArchive> npz_;
};

// `b`'s name in a message that already named `a`: "member y_train.npy"
// when both are members of one archive, else its whole name.
std::string AlsoNamed(const NpyArray& a, const NpyArray& b) {
  const size_t at = b.name().rfind(", member ");
  if (at != std::string::npos && a.name().compare(0, at + 2, b.name(), 0, at + 2) == 0) {
    return b.name().substr(at + 2);
  }
  return b.name();
}

struct Split {
  NpyArray x, y;
  ImageSetShape shape;
};

StatusOr<ImageSetShape> ImagesShape(const NpyArray& x) {
  if (x.dtype() != NpyDtype::kUint8 && x.dtype() != NpyDtype::kFloat32) {
    return InvalidArgumentError(x.name() + ": dtype " + NpyDtypeName(x.dtype()) +
                                " is not supported for images: use uint8 (scaled by 1/255) or float32 (used as "
                                "they are)");
  }
  const std::vector<size_t>& s = x.shape();
  if (s.size() != 3 && s.size() != 4) {
    return InvalidArgumentError(x.name() + ": shape " + x.ShapeString() +
                                " is not a set of images (N x H x W, or N x H x W x C channels last)");
  }
  if (s[0] == 0) return InvalidArgumentError(x.name() + ": holds no examples (shape " + x.ShapeString() + ")");
  const size_t c = s.size() == 4 ? s[3] : 1;
  if (s[1] == 0 || s[2] == 0 || c == 0 || s[1] > INT_MAX || s[2] > INT_MAX || c > INT_MAX ||
      s[1] * s[2] * c > size_t{1} << 30) {
    return InvalidArgumentError(x.name() + ": shape " + x.ShapeString() + " has an empty or too large image");
  }
  return ImageSetShape{.height = int(s[1]), .width = int(s[2]), .channels = int(c)};
}

Status CheckLabelsShape(const NpyArray& y, const NpyArray& x, bool float_targets) {
  const std::vector<size_t>& s = y.shape();
  if (float_targets) {  // regression: N or N x K numbers
    if (s.size() != 1 && !(s.size() == 2 && s[1] >= 1 && s[1] <= size_t(kMaxClasses))) {
      return InvalidArgumentError(y.name() + ": shape " + y.ShapeString() +
                                  " is not targets (N, or N x K for K values per example)");
    }
  } else if (!NpyDtypeIsInteger(y.dtype())) {
    return InvalidArgumentError(y.name() + ": dtype " + NpyDtypeName(y.dtype()) +
                                " is not supported for labels: use an integer dtype (class indices), or --loss mse "
                                "for float targets");
  } else if (s.size() != 1 && !(s.size() == 2 && s[1] == 1)) {
    return InvalidArgumentError(y.name() + ": shape " + y.ShapeString() +
                                " is not one label per example (N or N x 1; for one-hot labels save "
                                "np.argmax(y, axis=1))");
  }
  if (s[0] != x.shape()[0]) {
    return InvalidArgumentError(x.name() + " holds " + std::to_string(x.shape()[0]) + " images but " +
                                AlsoNamed(x, y) + " holds " + std::to_string(s[0]) + " labels; the counts must match");
  }
  return OkStatus();
}

StatusOr<Split> OpenSplit(const ArraySource& src, const std::string& split, bool load, bool float_targets) {
  MIRRORED_ASSIGN_OR_RETURN(NpyArray x, src.Get("x_" + split, load));
  MIRRORED_ASSIGN_OR_RETURN(NpyArray y, src.Get("y_" + split, true));  // labels are always read
  MIRRORED_ASSIGN_OR_RETURN(ImageSetShape shape, ImagesShape(x));
  MIRRORED_RETURN_IF_ERROR(CheckLabelsShape(y, x, float_targets));
  return Split{std::move(x), std::move(y), shape};
}

Status CheckSameImages(const Split& train, const Split& test) {
  const ImageSetShape &a = train.shape, &b = test.shape;
  if (a.height != b.height || a.width != b.width || a.channels != b.channels) {
    return InvalidArgumentError(test.x.name() + ": images are " + b.ImageString() + ", but " +
                                AlsoNamed(test.x, train.x) + "'s are " + a.ImageString() +
                                "; the splits must have one shape");
  }
  if (train.x.dtype() != test.x.dtype()) {
    return InvalidArgumentError(test.x.name() + ": dtype " + NpyDtypeName(test.x.dtype()) + ", but " +
                                AlsoNamed(test.x, train.x) + "'s is " + NpyDtypeName(train.x.dtype()) +
                                " (uint8 is scaled by 1/255, float32 is not): save both alike");
  }
  return OkStatus();
}

// The labels as int32, each in [0, below) (below 0: in [0, kMaxClasses)).
StatusOr<std::vector<int32_t>> ReadLabels(const NpyArray& y, int64_t below) {
  std::vector<int32_t> out(y.count());
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t v = y.Int64At(i);
    if (v < 0) {
      return InvalidArgumentError(y.name() + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                                  " is negative (labels are class indices 0, 1, ...)");
    }
    if (below > 0 && v >= below) {
      return InvalidArgumentError(y.name() + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                                  " is not a class of the training labels (0 to " + std::to_string(below - 1) + ")");
    }
    if (v >= kMaxClasses) {
      return InvalidArgumentError(y.name() + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                                  " is too large (at most " + std::to_string(kMaxClasses) + " classes)");
    }
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

// y's targets as floats (any number dtype), each finite; their width in *width.
StatusOr<std::vector<float>> ReadTargets(const NpyArray& y, int* width) {
  *width = y.shape().size() == 2 ? int(y.shape()[1]) : 1;
  std::vector<float> out(y.count());
  for (size_t i = 0; i < out.size(); ++i) {
    if (NpyDtypeIsInteger(y.dtype())) {
      out[i] = static_cast<float>(y.Int64At(i));
    } else if (y.dtype() == NpyDtype::kFloat32) {
      std::memcpy(&out[i], y.data().data() + 4 * i, 4);
    } else {
      double v;
      std::memcpy(&v, y.data().data() + 8 * i, 8);
      out[i] = static_cast<float>(v);
    }
    if (!std::isfinite(out[i])) {
      return InvalidArgumentError(y.name() + ": target " + std::to_string(out[i]) + " at index " +
                                  std::to_string(i / size_t(*width)) + " is not a finite number");
    }
  }
  return out;
}

Status CheckSameTargets(const Split& train, const Split& test) {
  const size_t ka = train.y.shape().size() == 2 ? train.y.shape()[1] : 1;
  const size_t kb = test.y.shape().size() == 2 ? test.y.shape()[1] : 1;
  if (ka != kb) {
    return InvalidArgumentError(test.y.name() + ": shape " + test.y.ShapeString() + ", but " +
                                AlsoNamed(test.y, train.y) + "'s is " + train.y.ShapeString() +
                                ": the targets must have one width");
  }
  return OkStatus();
}

Dataset MakeDataset(const Split& s, std::vector<int32_t> labels) {
  const ImageSetShape& sh = s.shape;
  if (s.x.dtype() == NpyDtype::kFloat32) {
    return Dataset::Float32In(sh.height, sh.width, sh.channels, s.x.region(), s.x.data(), std::move(labels));
  }
  return Dataset(sh.height, sh.width, sh.channels, s.x.region(), s.x.data(), 1.0f / 255.0f, std::move(labels));
}

}  // namespace

bool NumpyData::IsNumpyPath(const std::string& path) {
  if (IsDirectory(path)) return IsRegularFile(path + "/x_train.npy") || IsRegularFile(path + "/x_test.npy");
  return path.ends_with(".npz") || (IsRegularFile(path) && path.ends_with(".npy"));
}

StatusOr<ImageSetShape> NumpyData::CheckFiles(const std::string& path, bool with_train, bool with_test,
                                              bool float_targets) {
  MIRRORED_ASSIGN_OR_RETURN(ArraySource src, ArraySource::Open(path));
  // The training labels give the class count: the evaluator needs them too.
  MIRRORED_ASSIGN_OR_RETURN(Split train, OpenSplit(src, "train", /*load=*/false, float_targets));
  if (with_test) {
    MIRRORED_ASSIGN_OR_RETURN(Split test, OpenSplit(src, "test", /*load=*/false, float_targets));
    MIRRORED_RETURN_IF_ERROR(CheckSameImages(train, test));
    if (float_targets) MIRRORED_RETURN_IF_ERROR(CheckSameTargets(train, test));
  }
  (void)with_train;
  ImageSetShape shape = train.shape;
  if (float_targets) {  // the target width is in the header
    shape.regression = true;
    shape.classes = train.y.shape().size() == 2 ? int(train.y.shape()[1]) : 1;
  }
  return shape;
}

// Float targets (regression) instead of class labels.
StatusOr<NumpyData> NumpyData::LoadTargets(const std::string& path, bool with_train, bool with_test) {
  MIRRORED_ASSIGN_OR_RETURN(ArraySource src, ArraySource::Open(path));
  MIRRORED_ASSIGN_OR_RETURN(Split train, OpenSplit(src, "train", /*load=*/with_train, /*float_targets=*/true));
  int width = 0;
  MIRRORED_ASSIGN_OR_RETURN(std::vector<float> y_train, ReadTargets(train.y, &width));
  NumpyData d;
  d.shape_ = train.shape;
  d.shape_.classes = width;
  d.shape_.regression = true;
  if (with_test) {
    MIRRORED_ASSIGN_OR_RETURN(Split test, OpenSplit(src, "test", /*load=*/true, /*float_targets=*/true));
    MIRRORED_RETURN_IF_ERROR(CheckSameImages(train, test));
    MIRRORED_RETURN_IF_ERROR(CheckSameTargets(train, test));
    MIRRORED_ASSIGN_OR_RETURN(std::vector<float> y_test, ReadTargets(test.y, &width));
    d.test_ = MakeDataset(test, std::vector<int32_t>(test.y.shape()[0], 0));
    d.test_.SetTargets(width, std::move(y_test));
  }
  if (with_train) {
    d.train_ = MakeDataset(train, std::vector<int32_t>(train.y.shape()[0], 0));
    d.train_.SetTargets(width, std::move(y_train));
  }
  return d;
}

StatusOr<NumpyData> NumpyData::Load(const std::string& path, bool with_train, bool with_test, bool float_targets) {
  if (float_targets) return LoadTargets(path, with_train, with_test);
  MIRRORED_ASSIGN_OR_RETURN(ArraySource src, ArraySource::Open(path));
  MIRRORED_ASSIGN_OR_RETURN(Split train, OpenSplit(src, "train", /*load=*/with_train, false));
  MIRRORED_ASSIGN_OR_RETURN(std::vector<int32_t> y_train, ReadLabels(train.y, /*below=*/0));
  NumpyData d;
  d.shape_ = train.shape;
  d.shape_.classes = y_train.empty() ? 0 : *std::max_element(y_train.begin(), y_train.end()) + 1;
  if (with_test) {
    MIRRORED_ASSIGN_OR_RETURN(Split test, OpenSplit(src, "test", /*load=*/true, false));
    MIRRORED_RETURN_IF_ERROR(CheckSameImages(train, test));
    MIRRORED_ASSIGN_OR_RETURN(std::vector<int32_t> y_test, ReadLabels(test.y, d.shape_.classes));
    d.test_ = MakeDataset(test, std::move(y_test));
  }
  if (with_train) d.train_ = MakeDataset(train, std::move(y_train));
  return d;
}

}  // namespace mirrored::data
