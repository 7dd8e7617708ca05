// How the evaluator keeps the chief from pruning checkpoints it has not
// evaluated yet, across machines sharing RUN_DIR, with no coordination
// service: a lease file, RUN_DIR/checkpoints/eval-lease, rewritten atomically
// by the evaluator (the only writer), read by the chief's CheckpointWriter
// before pruning:
//   {"reading": "ckpt-400" | null, "last_evaluated_step": 200 | null,
//    "following": true | false, "start_run": "5d0e7a9c31f2b864" | null}
// "start_run" names the chief's start (training_start.h) that the progress
// belongs to: after another start from an earlier step, the progress past
// that step is an earlier run's.
// The chief never deletes the checkpoint named by "reading", however old.
// While "following" is true (an evaluator is running, or died without
// finishing), it also keeps the checkpoints after "last_evaluated_step" (the
// evaluator's backlog) that are among the newest 2 x --keep-checkpoints: an
// evaluator loses a checkpoint only when it falls that far behind (the chief
// warns, naming it), and disk use stays bounded even if the evaluator died.
//
// The evaluator protocol: Follow() when it starts; pick the oldest complete
// checkpoint after its progress, Acquire(step), then open and validate it;
// if that fails with NotFound/DataLoss (pruned in the instant before the
// lease landed, or damaged) skip it, and once skipped for good Release(step)
// it. MarkEvaluated(step) releases "reading" and records progress, so a
// restarted evaluator resumes after `step`: only a step really evaluated is
// recorded, never one skipped (a restarted evaluator looks at that again,
// and while it follows the chief keeps it as part of the backlog; recorded,
// it was said to be "evaluated before"). Stop() when it
// ends normally (final checkpoint, --max-evaluations, --eval-timeout): a
// later job on the same RUN_DIR without an evaluator prunes as usual.
// Pause() when a signal stops it before its end (the launcher stopping or
// restarting the job, a Ctrl-C): the backlog stays protected, as for an
// evaluator that died, so that the one started again misses nothing.
//
//   MIRRORED_RETURN_IF_ERROR(EvaluatorLease::Follow(env, run_dir));
//   MIRRORED_RETURN_IF_ERROR(EvaluatorLease::Acquire(env, run_dir, 400));
//   ... evaluate ckpt-400 ...
//   MIRRORED_RETURN_IF_ERROR(EvaluatorLease::MarkEvaluated(env, run_dir, 400));
//   MIRRORED_RETURN_IF_ERROR(EvaluatorLease::Stop(env, run_dir));
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/run_dir/file_env.h"

namespace mirrored {

inline constexpr char kEvalLeaseFileName[] = "eval-lease";

class EvaluatorLease {
 public:
  struct State {
    std::optional<int64_t> reading;              // protected from pruning
    std::optional<int64_t> last_evaluated_step;  // progress, for a restarted evaluator
    bool following = false;                      // the backlog after it is protected too
    std::optional<std::string> start_run;        // training_start.h's run of the progress

    // Whether the chief must keep ckpt-<step> for the evaluator: it reads
    // it, or it is in the followed backlog.
    bool Protects(int64_t step) const {
      return step == reading ||
             (following && (!last_evaluated_step || step > *last_evaluated_step));
    }
  };

  // The current lease; an absent file reads as no lease. A malformed file is
  // DataLoss (the writer then prunes nothing, and warns). A file without
  // "following" (written before it existed) reads as not following.
  static StatusOr<State> Read(FileEnv* env, const std::string& run_dir);
  // Marks an evaluator as following the job, keeping the recorded progress
  // (creates RUN_DIR/checkpoints/ if the chief has not yet).
  static Status Follow(FileEnv* env, const std::string& run_dir);
  // Protects ckpt-<step> from pruning, keeping the rest of the lease (and
  // following: a lease lost meanwhile is rewritten as following).
  static Status Acquire(FileEnv* env, const std::string& run_dir, int64_t step);
  // Releases "reading" and records `step` as evaluated, following, under the
  // chief's start `start_run` ("" when there is no record of one).
  static Status MarkEvaluated(FileEnv* env, const std::string& run_dir, int64_t step,
                              const std::string& start_run = "");
  // Releases "reading" if it names ckpt-<step> (skipped: damaged or gone),
  // keeping the progress and following.
  static Status Release(FileEnv* env, const std::string& run_dir, int64_t step);
  // The evaluator has ended normally: nothing is protected any more; the
  // progress is kept.
  static Status Stop(FileEnv* env, const std::string& run_dir);
  // The evaluator stops before its end: "reading" is released, the backlog
  // after the progress stays protected (following).
  static Status Pause(FileEnv* env, const std::string& run_dir);

 private:
  static Status Write(FileEnv* env, const std::string& run_dir, const State& state);
  // Read() for the evaluator's own updates: a missing or damaged lease
  // starts from nothing.
  static State ReadOrEmpty(FileEnv* env, const std::string& run_dir);
};

}  // namespace mirrored
