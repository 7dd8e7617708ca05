// How a training job tells its evaluator where it started: the chief writes
// RUN_DIR/checkpoints/training-start atomically when it starts, with the
// step it resumes from (0: afresh) and a fresh random `run`:
//   {"from_step": 400, "run": "5d0e7a9c31f2b864", "time": 1763860000.25}
// Every checkpoint after `from_step` is this run's; records of later steps
// (train, validation and eval lines, an evaluator's progress) are of a run
// that went further and were lost with its checkpoints. The evaluator keeps
// the `run` its progress belongs to in its lease: a new one whose from_step
// is behind that progress makes it evaluate again from from_step. The
// chief's pruning likewise does not count an earlier run's progress past
// from_step as evaluated.
//
//   MIRRORED_ASSIGN_OR_RETURN(std::string run, TrainingStart::Write(env, run_dir, 400));
//   StatusOr<std::optional<TrainingStart::Record>> start = TrainingStart::Read(env, run_dir);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/run_dir/file_env.h"
#include "common/status.h"

namespace mirrored {

inline constexpr char kTrainingStartFileName[] = "training-start";

class TrainingStart {
 public:
  struct Record {
    int64_t from_step = 0;  // the checkpoint the run resumed from; 0 afresh
    std::string run;        // random, new for every start
    double time = 0;        // Unix seconds (for people; not compared)
  };
  // Records a start from `from_step`, now; returns its new `run`.
  static StatusOr<std::string> Write(FileEnv* env, const std::string& run_dir, int64_t from_step);
  // The record, or nullopt when there is none. DataLoss for a damaged file.
  static StatusOr<std::optional<Record>> Read(FileEnv* env, const std::string& run_dir);
};

}  // namespace mirrored
