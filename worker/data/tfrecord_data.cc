#include "worker/data/tfrecord_data.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <vector>

#include "proto/tf_example.pb.h"
#include "worker/data/tfrecord_reader.h"

namespace mirrored::data {
namespace {

using tensorflow::Example;
using tensorflow::Feature;

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The files of one split ("train" or "test"), in name order.
std::vector<std::string> SplitFiles(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.starts_with(prefix) && name.find(".tfrecord") != std::string::npos) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<std::string> paths;
  for (const std::string& n : names) {
    struct stat st {};
    const std::string path = dir + "/" + n;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) paths.push_back(path);
  }
  return paths;
}

std::string FeatureNames(const Example& ex) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : ex.features().feature()) keys.push_back("\"" + k + "\"");
  std::sort(keys.begin(), keys.end());
  std::string s;
  for (const std::string& k : keys) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "none" : s;
}

const Feature* Find(const Example& ex, const std::string& key) {
  const auto& m = ex.features().feature();
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// The int64 values of feature `key`; nullopt when absent.
StatusOr<std::optional<std::vector<int64_t>>> Int64s(const Example& ex, const std::string& key,
                                                      const std::string& where) {
  const Feature* f = Find(ex, key);
  if (f == nullptr) return std::optional<std::vector<int64_t>>();
  if (!f->has_int64_list()) {
    return InvalidArgumentError(where + ": feature \"" + key + "\" is not an int64_list");
  }
  return std::optional<std::vector<int64_t>>(std::vector<int64_t>(f->int64_list().value().begin(),
                                                                  f->int64_list().value().end()));
}

StatusOr<ImageSetShape> ShapeOf(const Example& ex, const std::string& where) {
  MIRRORED_ASSIGN_OR_RETURN(auto shape, Int64s(ex, "shape", where));
  if (!shape) {
    MIRRORED_ASSIGN_OR_RETURN(auto h, Int64s(ex, "height", where));
    MIRRORED_ASSIGN_OR_RETURN(auto w, Int64s(ex, "width", where));
    MIRRORED_ASSIGN_OR_RETURN(auto depth, Int64s(ex, "depth", where));
    MIRRORED_ASSIGN_OR_RETURN(auto channels, Int64s(ex, "channels", where));
    if (!h || !w || h->size() != 1 || w->size() != 1) {
      return InvalidArgumentError(where + ": no feature \"shape\" (int64 [H, W, C]) nor \"height\" and \"width\" "
                                  "(features: " + FeatureNames(ex) + ")");
    }
    shape.emplace(std::vector<int64_t>{h->front(), w->front()});
    if (depth && depth->size() == 1) shape->push_back(depth->front());
    else if (channels && channels->size() == 1) shape->push_back(channels->front());
  }
  if (shape->size() == 2) shape->push_back(1);
  const std::vector<int64_t>& s = *shape;
  if (s.size() != 3 || s[0] <= 0 || s[1] <= 0 || s[2] <= 0 || s[0] > INT_MAX || s[1] > INT_MAX || s[2] > INT_MAX ||
      s[0] * s[1] > (int64_t{1} << 30) / s[2]) {
    std::string text;
    for (int64_t v : s) text += (text.empty() ? "" : ", ") + std::to_string(v);
    return InvalidArgumentError(where + ": image shape [" + text + "] is not [H, W] or [H, W, C] of positive sizes");
  }
  return ImageSetShape{.height = int(s[0]), .width = int(s[1]), .channels = int(s[2])};
}

struct ParsedExample {
  ImageSetShape shape;
  PixelEncoding encoding = PixelEncoding::kBytes;
  const uint8_t* pixels = nullptr;  // inside the record
  int64_t label = 0;
  std::vector<float> targets;  // float_targets: the label feature's values
};

// A label feature's values as float targets (a float_list or an int64_list).
StatusOr<std::vector<float>> Targets(const Feature& f, const std::string& key, const std::string& where) {
  std::vector<float> out;
  if (f.has_float_list()) out.assign(f.float_list().value().begin(), f.float_list().value().end());
  if (f.has_int64_list()) {
    for (int64_t v : f.int64_list().value()) out.push_back(static_cast<float>(v));
  }
  if (out.empty()) {
    return InvalidArgumentError(where + ": feature \"" + key + "\" holds no targets (a float_list of one value "
                                "or more)");
  }
  for (float v : out) {
    if (!std::isfinite(v)) return InvalidArgumentError(where + ": feature \"" + key + "\" holds a target that is "
                                                       "not a finite number");
  }
  return out;
}

// Where `value` lies inside `record` (the parser copied it out): any
// place holding these bytes holds the same pixels.
const uint8_t* Locate(std::span<const uint8_t> record, const void* value, size_t size) {
  return static_cast<const uint8_t*>(::memmem(record.data(), record.size(), value, size));
}

StatusOr<const uint8_t*> ImagePixels(const Example& ex, const std::string& key, const ImageSetShape& s,
                                     std::span<const uint8_t> record, const std::string& where,
                                     PixelEncoding* encoding) {
  const Feature& f = *Find(ex, key);
  const size_t size = size_t(s.height) * s.width * s.channels;
  const std::string named = where + ": feature \"" + key + "\"";
  if (f.has_bytes_list()) {
    *encoding = PixelEncoding::kBytes;
    if (f.bytes_list().value_size() != 1 || f.bytes_list().value(0).size() != size) {
      const size_t got = f.bytes_list().value_size() == 1 ? f.bytes_list().value(0).size() : 0;
      return InvalidArgumentError(named + " holds " + std::to_string(f.bytes_list().value_size()) + " value(s) of " +
                                  std::to_string(got) + " bytes; shape " + s.ImageString() + " needs one of " +
                                  std::to_string(size) + " raw uint8 pixels (PNG or JPEG images are not decoded)");
    }
    return Locate(record, f.bytes_list().value(0).data(), size);
  }
  if (f.has_float_list()) {
    *encoding = PixelEncoding::kFloat32;
    if (size_t(f.float_list().value_size()) != size) {
      return InvalidArgumentError(named + " holds " + std::to_string(f.float_list().value_size()) +
                                  " floats; shape " + s.ImageString() + " needs " + std::to_string(size));
    }
    const uint8_t* at = Locate(record, f.float_list().value().data(), size * sizeof(float));
    if (at == nullptr) {
      return InvalidArgumentError(named + ": its floats are not stored packed (as TensorFlow writes them)");
    }
    return at;
  }
  return InvalidArgumentError(named + " is an int64_list: write raw uint8 pixels (bytes_list) or a float_list");
}

StatusOr<ParsedExample> ParseExample(std::span<const uint8_t> record, const DataOptions& options,
                                     const std::string& where) {
  Example ex;
  if (!ex.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return InvalidArgumentError(where + ": not a tf.train.Example (the protobuf does not parse)");
  }
  std::string image_key = options.tfrecord_image_key;
  if (image_key.empty()) image_key = Find(ex, "image") == nullptr && Find(ex, "image_raw") ? "image_raw" : "image";
  if (Find(ex, image_key) == nullptr) {
    return InvalidArgumentError(where + ": no feature \"" + image_key + "\" (features: " + FeatureNames(ex) +
                                "; --tfrecord-image-key names another)");
  }
  ParsedExample p;
  MIRRORED_ASSIGN_OR_RETURN(p.shape, ShapeOf(ex, where));
  MIRRORED_ASSIGN_OR_RETURN(p.pixels, ImagePixels(ex, image_key, p.shape, record, where, &p.encoding));
  const Feature* label = Find(ex, options.tfrecord_label_key);
  if (label == nullptr) {
    return InvalidArgumentError(where + ": no feature \"" + options.tfrecord_label_key +
                                "\" (features: " + FeatureNames(ex) +
                                "; --tfrecord-label-key names another)");
  }
  if (options.float_targets) {
    MIRRORED_ASSIGN_OR_RETURN(p.targets, Targets(*label, options.tfrecord_label_key, where));
    return p;
  }
  if (!label->has_int64_list() || label->int64_list().value_size() != 1) {
    return InvalidArgumentError(where + ": feature \"" + options.tfrecord_label_key +
                                "\" is not one int64 (a class index: an int64_list of one value" +
                                (label->has_float_list() ? "; float targets need --loss mse)" : ")"));
  }
  p.label = label->int64_list().value(0);
  return p;
}

// The examples of one split, as Dataset::Rows takes them.
struct SplitContents {
  std::vector<std::string> files;
  ImageSetShape shape;
  PixelEncoding encoding = PixelEncoding::kBytes;
  std::string first;  // the record that set shape and encoding
  std::vector<const uint8_t*> rows;
  std::vector<int32_t> labels;
  int target_width = 0;  // float targets: the first record's count
  std::vector<float> targets;
  std::shared_ptr<std::vector<std::shared_ptr<const ByteRegion>>> regions =
      std::make_shared<std::vector<std::shared_ptr<const ByteRegion>>>();
};

Status CheckLike(const SplitContents& s, const ParsedExample& p, const std::string& where) {
  const ImageSetShape& a = s.shape;
  if (p.shape.height != a.height || p.shape.width != a.width || p.shape.channels != a.channels) {
    return InvalidArgumentError(where + ": image " + p.shape.ImageString() + ", but " + s.first + "'s is " +
                                a.ImageString() + "; every image must have one shape");
  }
  if (p.encoding != s.encoding) {
    return InvalidArgumentError(where + ": image of another kind (bytes_list or float_list) than " + s.first +
                                "'s; write every image alike");
  }
  return OkStatus();
}

Status CheckLabel(int64_t v, int below, const std::string& where, const std::string& key) {
  if (v < 0) {
    return InvalidArgumentError(where + ": feature \"" + key + "\": label " + std::to_string(v) +
                                " is negative (labels are class indices 0, 1, ...)");
  }
  if (below > 0 && v >= below) {
    return InvalidArgumentError(where + ": feature \"" + key + "\": label " + std::to_string(v) +
                                " is not a class of the training labels (0 to " + std::to_string(below - 1) + ")");
  }
  if (v >= kMaxClasses) {
    return InvalidArgumentError(where + ": feature \"" + key + "\": label " + std::to_string(v) +
                                " is too large (at most " + std::to_string(kMaxClasses) + " classes)");
  }
  return OkStatus();
}

Status AddTargets(const std::vector<float>& targets, const std::string& where, const std::string& key,
                  SplitContents* s) {
  if (s->target_width == 0) s->target_width = int(targets.size());
  if (targets.size() != size_t(s->target_width)) {
    return InvalidArgumentError(where + ": feature \"" + key + "\" holds " + std::to_string(targets.size()) +
                                " targets, but " + s->first + "'s holds " + std::to_string(s->target_width) +
                                "; every record needs as many");
  }
  s->targets.insert(s->targets.end(), targets.begin(), targets.end());
  return OkStatus();
}

// Reads every record of one file into `s` (only the first when `first_only`).
Status ReadFile(const std::string& path, const DataOptions& options, int below, bool first_only, SplitContents* s) {
  MIRRORED_ASSIGN_OR_RETURN(TfRecordReader reader, TfRecordReader::Open(path, /*populate=*/!first_only));
  s->regions->push_back(reader.region());
  while (true) {
    MIRRORED_ASSIGN_OR_RETURN(std::optional<std::span<const uint8_t>> record, reader.Next());
    if (!record) return OkStatus();
    const std::string where = reader.LastRecordName();
    MIRRORED_ASSIGN_OR_RETURN(ParsedExample p, ParseExample(*record, options, where));
    if (s->first.empty()) {
      s->shape = p.shape;
      s->encoding = p.encoding;
      s->first = where;
    }
    MIRRORED_RETURN_IF_ERROR(CheckLike(*s, p, where));
    if (options.float_targets) {
      MIRRORED_RETURN_IF_ERROR(AddTargets(p.targets, where, options.tfrecord_label_key, s));
    } else {
      MIRRORED_RETURN_IF_ERROR(CheckLabel(p.label, below, where, options.tfrecord_label_key));
    }
    s->rows.push_back(p.pixels);
    s->labels.push_back(static_cast<int32_t>(p.label));
    if (first_only) return OkStatus();
  }
}

StatusOr<SplitContents> ReadSplit(const std::string& dir, const std::string& prefix, const DataOptions& options,
                                  int below, bool first_only) {
  SplitContents s;
  s.files = SplitFiles(dir, prefix);
  if (s.files.empty()) {
    return NotFoundError(dir + ": no " + prefix + "*.tfrecord file (the " + prefix +
                         " split is every file whose name starts with \"" + prefix + "\" and holds \".tfrecord\")");
  }
  for (const std::string& path : s.files) {
    MIRRORED_RETURN_IF_ERROR(ReadFile(path, options, below, first_only, &s));
    if (first_only && !s.rows.empty()) break;
  }
  if (s.rows.empty()) return InvalidArgumentError(s.files.front() + ": holds no records (nor do the other " +
                                                  prefix + " files)");
  return s;
}

Status CheckSameImages(const SplitContents& train, const SplitContents& test) {
  if (test.shape.height != train.shape.height || test.shape.width != train.shape.width ||
      test.shape.channels != train.shape.channels || test.encoding != train.encoding) {
    return InvalidArgumentError(test.first + ": images are " + test.shape.ImageString() +
                                (test.encoding == PixelEncoding::kBytes ? " bytes" : " floats") + ", but " +
                                train.first + "'s are " + train.shape.ImageString() +
                                (train.encoding == PixelEncoding::kBytes ? " bytes" : " floats") +
                                "; the splits must be alike");
  }
  return OkStatus();
}

Dataset MakeDataset(SplitContents s) {
  Dataset d = Dataset::Rows(s.shape.height, s.shape.width, s.shape.channels, s.encoding, std::move(s.regions),
                            std::move(s.rows), std::move(s.labels));
  if (s.target_width > 0) d.SetTargets(s.target_width, std::move(s.targets));
  return d;
}

// The class count, or the target width.
void SetClasses(const SplitContents& train, ImageSetShape* shape) {
  shape->regression = train.target_width > 0;
  shape->classes = shape->regression ? train.target_width
                                     : *std::max_element(train.labels.begin(), train.labels.end()) + 1;
}

}  // namespace

bool TfRecordData::IsTfRecordPath(const std::string& path) {
  return IsDirectory(path) && (!SplitFiles(path, "train").empty() || !SplitFiles(path, "test").empty());
}

StatusOr<ImageSetShape> TfRecordData::CheckFiles(const std::string& dir, bool with_train, bool with_test,
                                                 const DataOptions& options) {
  (void)with_train;  // the training labels give the class count: an evaluator needs them too
  MIRRORED_ASSIGN_OR_RETURN(SplitContents train, ReadSplit(dir, "train", options, 0, /*first_only=*/true));
  if (with_test) {
    MIRRORED_ASSIGN_OR_RETURN(SplitContents test, ReadSplit(dir, "test", options, 0, /*first_only=*/true));
    MIRRORED_RETURN_IF_ERROR(CheckSameImages(train, test));
  }
  ImageSetShape shape = train.shape;
  SetClasses(train, &shape);
  if (!shape.regression) shape.classes = 0;  // the labels are read by Load
  return shape;
}

StatusOr<TfRecordData> TfRecordData::Load(const std::string& dir, bool with_train, bool with_test,
                                          const DataOptions& options) {
  MIRRORED_ASSIGN_OR_RETURN(SplitContents train, ReadSplit(dir, "train", options, 0, /*first_only=*/false));
  TfRecordData d;
  d.shape_ = train.shape;
  SetClasses(train, &d.shape_);
  if (with_test) {
    MIRRORED_ASSIGN_OR_RETURN(SplitContents test, ReadSplit(dir, "test", options, d.shape_.classes, false));
    MIRRORED_RETURN_IF_ERROR(CheckSameImages(train, test));
    if (test.target_width != train.target_width) {
      return InvalidArgumentError(test.first + ": " + std::to_string(test.target_width) + " targets, but " +
                                  train.first + "'s are " + std::to_string(train.target_width) +
                                  "; the splits need as many");
    }
    d.test_ = MakeDataset(std::move(test));
  }
  if (with_train) d.train_ = MakeDataset(std::move(train));
  return d;
}

}  // namespace mirrored::data
