// A labelled image set in TFRecord files of tf.train.Example records, in
// one directory: the training split is every file whose name starts with
// "train" and holds ".tfrecord" (train.tfrecord, train-00000-of-00004.tfrecord,
// train.tfrecords...), the test split every "test" one, each in name order.
// Each Example holds:
//   image  raw uint8 bytes (bytes_list of one value, H x W x C, scaled by
//          1/255), or a float_list of H x W x C values (used as they are);
//          "image" by default, else "image_raw" (TF's tutorial)
//   shape  int64_list [H, W, C] or [H, W]; else int64 features height,
//          width and depth (or channels; 1 if neither)
//   label  int64_list of one class index; with --loss mse (float_targets)
//          a float_list (or int64_list) of K targets, K alike in every record
// The pixels stay in the mapped files (the workers of a machine share
// their pages); only a pointer and a label per example are held.
//
//   StatusOr<TfRecordData> d = TfRecordData::Load("data/", /*with_train=*/true, /*with_test=*/true, {});
//   d->shape().classes;  d->train().size();
//   StatusOr<ImageSetShape> s = TfRecordData::CheckFiles("data/", true, true, {});   // first records only
#pragma once

#include <string>

#include "common/status.h"
#include "worker/data/data_options.h"
#include "worker/data/dataset.h"
#include "worker/data/image_set_shape.h"

namespace mirrored::data {

class TfRecordData {
 public:
  // Whether `path` is a directory holding train* or test* .tfrecord files.
  static bool IsTfRecordPath(const std::string& path);

  // Loads the splits asked for; the class count (largest training label
  // + 1) always comes from the training records. Every record is read and
  // checked. Errors (NotFound, InvalidArgument: exit 2) name the file, the
  // record's index and byte offset, and the feature: a bad CRC, a
  // truncated file, a record that is not an Example, a missing feature or
  // one of another kind, an image whose size is not its shape's, images of
  // another shape than the first, a negative label or a test label that is
  // not a training class, float images packed in another way.
  static StatusOr<TfRecordData> Load(const std::string& dir, bool with_train, bool with_test,
                                     const DataOptions& options);
  // Load's checks of each split's first record (milliseconds); classes is 0.
  static StatusOr<ImageSetShape> CheckFiles(const std::string& dir, bool with_train, bool with_test,
                                            const DataOptions& options);

  const Dataset& train() const { return train_; }
  const Dataset& test() const { return test_; }
  const ImageSetShape& shape() const { return shape_; }

 private:
  Dataset train_;
  Dataset test_;
  ImageSetShape shape_;
};

}  // namespace mirrored::data
