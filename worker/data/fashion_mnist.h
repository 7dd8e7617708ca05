// Loads Fashion-MNIST (train and test splits) from the four gzipped IDX files
// of Debian's dataset-fashion-mnist package, or any directory holding them.
// Validates everything a corrupt or mismatched download could get wrong.
//
//   StatusOr<FashionMnist> ds = FashionMnist::Load(FashionMnist::kDefaultDir);
//   if (!ds.ok()) { MIRRORED_LOG(ERROR) << ds.status(); return ExitCodeFor(ds.status()); }  // 2
//   const Dataset& train = ds->train();   // 60000 x 28x28x1, pixels in [0, 1]
#pragma once

#include <string>

#include "common/status.h"
#include "worker/data/dataset.h"
#include "worker/data/idx_cache.h"

namespace mirrored::data {

class FashionMnist {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
  static constexpr int kNumClasses = 10;

  // Reads DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. Errors
  // (NotFound or InvalidArgument, both exit code 2) name the file and the
  // problem: missing, truncated, corrupt gzip, wrong magic number, images not
  // 28x28, label out of range, image and label counts that differ.
  // `with_test` false skips the test split (training without validation):
  // test() is then empty. The decompressed files go through the machine's
  // dataset cache (idx_cache.h; `cache.dir` "" reads the sources only), so
  // the workers of one machine inflate them once and share one copy.
  static StatusOr<FashionMnist> Load(const std::string& dir, bool with_test = true,
                                     const IdxCacheOptions& cache = {.dir = IdxCacheDir()});
  // The test split only (an evaluator): train() is then empty, and the
  // training files need not be there.
  static StatusOr<FashionMnist> LoadTest(const std::string& dir,
                                         const IdxCacheOptions& cache = {.dir = IdxCacheDir()});

  // Whether Load's files are there, readable and whole, in a millisecond
  // (Load takes most of a second): a task checks before it joins a job, so
  // that a wrong --data fails at once instead of once every task has
  // registered. Reads only the headers and gzip length trailers
  // (IdxFile::ReadHeader): a wrong file, a truncated one or counts that do
  // not match fail here; a damaged payload only in Load. Errors: NotFound
  // (missing), PermissionDenied (unreadable), InvalidArgument, naming the file.
  static Status CheckFiles(const std::string& dir, bool with_test = true);
  // CheckFiles for LoadTest's files.
  static Status CheckTestFiles(const std::string& dir);

  // Loads one split from an explicit pair of files.
  static StatusOr<Dataset> LoadSplit(const std::string& images_path, const std::string& labels_path,
                                     const IdxCacheOptions& cache = {.dir = IdxCacheDir()});

  const Dataset& train() const { return train_; }
  const Dataset& test() const { return test_; }

 private:
  static Status CheckSplitFiles(const std::string& dir, bool with_train, bool with_test);

  Dataset train_;
  Dataset test_;
};

}  // namespace mirrored::data
