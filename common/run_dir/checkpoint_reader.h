// Finds and loads complete checkpoints under RUN_DIR/checkpoints/. A
// checkpoint is complete when its directory is named ckpt-<step>, both
// safetensors files validate (SafetensorsFile::Parse) and state.json parses
// with the same step. ".tmp-*" (and every other ".") entries are ignored; the
// `checkpoint` index is only cross-checked (a crash can leave it stale or
// missing), the directories themselves are authoritative.
//
//   CheckpointReader reader(FileEnv::Default(), run_dir);
//   StatusOr<LoadedCheckpoint> latest = reader.LoadLatest();   // NotFound: fresh run
//   if (latest.ok()) MIRRORED_RETURN_IF_ERROR(latest->model.CopyF32("dense/kernel", w, n));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/run_dir/checkpoint_state.h"
#include "common/run_dir/file_env.h"
#include "common/run_dir/safetensors_file.h"

namespace mirrored {

struct CheckpointInfo {
  int64_t step = 0;
  std::string dir;  // RUN_DIR/checkpoints/ckpt-<step>
  CheckpointState state;
};

struct LoadedCheckpoint {
  CheckpointInfo info;
  SafetensorsFile model;
  SafetensorsFile optimizer;
};

class CheckpointReader {
 public:
  // `env` is not owned and must outlive the reader. `model_only` (the
  // evaluator): Inspect and Load leave optimizer.safetensors alone (Load's
  // `optimizer` is then empty), so a damaged one does not cost the weights.
  CheckpointReader(FileEnv* env, std::string run_dir, bool model_only = false)
      : env_(env), run_dir_(std::move(run_dir)), model_only_(model_only) {}

  // Steps of the ckpt-<step> directories, ascending, unvalidated; empty when
  // there is no checkpoints directory.
  StatusOr<std::vector<int64_t>> ListCheckpointSteps();
  // Reads and fully validates ckpt-<step>. Errors: NotFound (no such
  // directory or file), DataLoss naming the file and the problem.
  StatusOr<LoadedCheckpoint> Load(int64_t step);
  // Load() of a checkpoint directory `dir` named ckpt-<step>, wherever it
  // lies (a copy outside its run directory). Same errors.
  StatusOr<LoadedCheckpoint> LoadDirectory(const std::string& dir, int64_t step);
  // Validates ckpt-<step> without reading tensor data: state.json and both
  // safetensors headers against the files' sizes. Same errors as Load().
  StatusOr<CheckpointInfo> Inspect(int64_t step);
  // The newest checkpoint that loads; each newer one that does not is
  // skipped with a WARNING naming the problem. NotFound when there is no
  // checkpoint. When there are some but none loads (a disk or a network
  // file system failing, not a fresh run): InvalidArgument naming them, so
  // the job stops instead of training from step 0 over them, unless
  // kStartOver (--restart-from-scratch), which says so and returns NotFound.
  enum class IfAllDamaged {
    kRefuse,     // InvalidArgument, pointing at --restart-from-scratch (a training job)
    kStartOver,  // a WARNING, then NotFound
    kReport,     // InvalidArgument naming the latest's problem (--export: nothing to start over)
  };
  StatusOr<LoadedCheckpoint> LoadLatest(IfAllDamaged if_all_damaged = IfAllDamaged::kRefuse);
  // A checkpoint ListComplete passed over: why, and its state.json when
  // that could be read.
  struct Skipped {
    int64_t step = 0;
    Status why;
    std::optional<CheckpointState> state;
  };
  // Every checkpoint that passes Inspect(), ascending by step (for the
  // evaluator); the others are skipped with a WARNING, or, given `skipped`,
  // returned there (for a caller that polls, to say it once).
  StatusOr<std::vector<CheckpointInfo>> ListComplete(std::vector<Skipped>* skipped = nullptr);

 private:
  StatusOr<CheckpointState> ReadState(const std::string& dir, int64_t step);
  Status InspectSafetensors(const std::string& path, const CheckpointState& state, const std::string& name);
  void CrossCheckIndex(int64_t chosen_step);

  FileEnv* env_;
  std::string run_dir_;
  bool model_only_ = false;
};

// The latest complete checkpoint of `run_dir` (fully validated, falling back
// past corrupt ones with a warning); nullopt when there is none. Errors only
// for I/O failures other than "not found" (e.g. permission denied).
StatusOr<std::optional<CheckpointInfo>> FindLatestCheckpoint(const std::string& run_dir,
                                                             FileEnv* env = FileEnv::Default());
// CheckpointReader::ListComplete() for `run_dir`.
StatusOr<std::vector<CheckpointInfo>> ListCompleteCheckpoints(const std::string& run_dir,
                                                              FileEnv* env = FileEnv::Default());

}  // namespace mirrored
