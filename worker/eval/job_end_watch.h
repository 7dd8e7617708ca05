// When an evaluator is done: the job has ended and its last checkpoint is
// reached (evaluated, now or by an earlier evaluator run; or skipped as
// damaged on two looks a poll apart, which is then an error: one look can
// catch a checkpoint being replaced mid-way). Asked after each poll's
// evaluations.
//
// The job's end is the chief's training-done record (training_done.h) of
// this run, i.e. one that appeared or changed after the evaluator started.
// An evaluator started by mirrored-launch runs beside training tasks that may
// be about to extend a finished run: a record it found at its start ends it
// only after kQuietGrace with nothing new (no checkpoint, no new record).
// One started on its own trusts any record, and so does one the launcher
// started again after every training task ended well
// (MIRRORED_TRAINING_ENDED): the record is that job's. Without a readable
// record (a run directory copied without it), an evaluator on its own takes
// the newest checkpoint's own mark, "final" in its state.json, unless a
// chief has started from it since (training-start) or holds the run
// directory.
//
//   JobEndWatch watch(env, run_dir, /*beside_a_job=*/false, initial_run);
//   JobEndWatch::Verdict v = watch.Check({listed, damaged}, done_step, skipped, summary.evaluations);
//   if (v.outcome == JobEndWatch::Outcome::kEnded) ... stop after ckpt-<v.final_step>
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/run_dir/checkpoint_reader.h"
#include "common/run_dir/file_env.h"
#include "common/status.h"
#include "worker/eval/skipped_checkpoints.h"

namespace mirrored {

// How long an evaluator started beside a job waits, with nothing new, before
// it trusts a training-done record that was there before it started (the
// job's chief may be about to resume and train on; it removes the record
// when it starts).
inline constexpr std::chrono::seconds kQuietGrace{60};

class JobEndWatch {
 public:
  // `beside_a_job`: started by mirrored-launch beside training tasks (not
  // after they all ended well). `initial_run`: the training-done record's
  // `run` as the evaluator started, read before anything slower (the
  // chief, started beside it, removes or rewrites it), if there was one.
  JobEndWatch(FileEnv* env, std::string run_dir, bool beside_a_job, std::optional<std::string> initial_run)
      : env_(env), run_dir_(std::move(run_dir)), beside_a_job_(beside_a_job), initial_run_(std::move(initial_run)) {}

  // What one poll found in RUN_DIR/checkpoints (CheckpointReader::ListComplete).
  struct Listing {
    const StatusOr<std::vector<CheckpointInfo>>& complete;
    const std::vector<CheckpointReader::Skipped>& damaged;
  };
  enum class Outcome {
    kGoingOn,             // not yet: poll again
    kEnded,               // the job's last checkpoint is evaluated
    kLastCheckpointLost,  // the job's last checkpoint was skipped: it cannot be evaluated
  };
  struct Verdict {
    Outcome outcome = Outcome::kGoingOn;
    int64_t final_step = -1;  // kEnded: the job's last checkpoint
    Status lost;              // kLastCheckpointLost: DataLoss naming it and why
  };
  // `evaluated_through`: the evaluator's progress (the last step evaluated
  // or passed over); `skipped`: what it passed over; `evaluations`: how many
  // this run made (none: an end says the last one was evaluated before).
  // Says on stdout why it waits for a record that predates the evaluator.
  Verdict Check(const Listing& listing, int64_t evaluated_through, const SkippedCheckpoints& skipped,
                int64_t evaluations);

  // A checkpoint was evaluated: the quiet grace starts again.
  void Progressed() { quiet_since_ = std::chrono::steady_clock::now(); }

 private:
  // The newest checkpoint's "final" mark, for an evaluator on its own
  // without a readable training-done record.
  std::optional<Verdict> CheckFinalMark(const Listing& listing, int64_t evaluated_through,
                                        const SkippedCheckpoints& skipped, int64_t evaluations);
  static Verdict Lost(int64_t step, const SkippedCheckpoints& skipped);

  FileEnv* const env_;
  const std::string run_dir_;
  const bool beside_a_job_;
  std::optional<std::string> initial_run_;
  std::chrono::steady_clock::time_point quiet_since_ = std::chrono::steady_clock::now();
  bool said_quiet_grace_ = false;
  bool said_done_unreadable_ = false;
};

}  // namespace mirrored
