// How a training job tells evaluators that no checkpoint will follow. The
// chief removes RUN_DIR/checkpoints/training-done when it starts (a job that
// resumes may train on past an earlier run's end), and when it ends normally
// (not preempted, not failed) writes it atomically, naming its last
// checkpoint and a fresh random `run`:
//   {"checkpoint": "ckpt-500", "step": 500, "run": "9f2c41d07a1be355", "time": 1763860000.25}
// An evaluator stops once it has evaluated `step` and the record is this
// run's: it appeared, or its `run` changed, after the evaluator started (no
// clock is compared: hosts' clocks differ). A record already there when an
// evaluator started beside a job may be an earlier run's that this job is
// about to extend; evaluator.cc waits a bounded time before trusting it.
//
//   MIRRORED_RETURN_IF_ERROR(TrainingDone::Remove(env, run_dir));
//   MIRRORED_RETURN_IF_ERROR(TrainingDone::Write(env, run_dir, 500));
//   StatusOr<std::optional<TrainingDone::Record>> done = TrainingDone::Read(env, run_dir);
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/run_dir/file_env.h"
#include "common/status.h"

namespace mirrored {

inline constexpr char kTrainingDoneFileName[] = "training-done";

class TrainingDone {
 public:
  struct Record {
    int64_t step = 0;  // the job's last checkpoint's step
    std::string run;   // random, new for every record written
    double time = 0;   // Unix seconds when the job ended (for people; not compared)
  };
  // Records that training ended at ckpt-<step>, now, under a new `run`.
  static Status Write(FileEnv* env, const std::string& run_dir, int64_t step);
  // Removes the record (none is fine): a job is training.
  static Status Remove(FileEnv* env, const std::string& run_dir);
  // The record, or nullopt when there is none. DataLoss for a damaged file.
  static StatusOr<std::optional<Record>> Read(FileEnv* env, const std::string& run_dir);
};

// Wall clock, Unix seconds.
double UnixNow();

// RUN_DIR/checkpoints/<name>, a record the chief writes atomically
// (training-done, training-start), parsed: nullopt when there is none; a
// file that is not JSON is DataLoss naming it and `shape`. The caller checks
// the fields (with `shape` too).
StatusOr<std::optional<nlohmann::json>> ReadRecordFile(FileEnv* env, const std::string& run_dir,
                                                       const std::string& name, const std::string& shape);

}  // namespace mirrored
