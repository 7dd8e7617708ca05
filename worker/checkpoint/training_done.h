// How a training job tells evaluators that no checkpoint will follow: when it
// ends normally at its final checkpoint (also when a finished job is started
// again and finds nothing left to train), the chief rewrites
// RUN_DIR/checkpoints/training-done atomically:
//   {"checkpoint": "ckpt-500", "step": 500, "time": 1763860000.25}
// `time` is the wall clock (Unix seconds) of that end. An evaluator started
// with the job takes a record written after its own start as "the job it runs
// beside is over": once it has evaluated `step` it stops, even when that
// checkpoint was evaluated by an earlier run (a rerun of a finished job). An
// older record belongs to an earlier run, which a job on the same directory
// may be extending with more steps.
//
//   MIRRORED_RETURN_IF_ERROR(TrainingDone::Write(env, run_dir, 500));
//   StatusOr<std::optional<TrainingDone::Record>> done = TrainingDone::Read(env, run_dir);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "worker/checkpoint/file_env.h"

namespace mirrored {

inline constexpr char kTrainingDoneFileName[] = "training-done";

class TrainingDone {
 public:
  struct Record {
    int64_t step = 0;     // the final checkpoint's step
    double time = 0;      // Unix seconds when the job ended
  };
  // Records that training ended at ckpt-<step>, now.
  static Status Write(FileEnv* env, const std::string& run_dir, int64_t step);
  // The record, or nullopt when there is none. DataLoss for a damaged file.
  static StatusOr<std::optional<Record>> Read(FileEnv* env, const std::string& run_dir);
};

// Wall clock, Unix seconds.
double UnixNow();

}  // namespace mirrored
