#include "worker/eval/job_end_watch.h"

#include <algorithm>

#include "common/logging.h"
#include "common/run_dir/run_dir_lock.h"
#include "worker/checkpoint/training_done.h"
#include "worker/checkpoint/training_start.h"
#include "worker/eval/evaluation_log.h"

namespace mirrored {

JobEndWatch::Verdict JobEndWatch::Lost(int64_t step, const SkippedCheckpoints& skipped) {
  return {Outcome::kLastCheckpointLost, -1,
          DataLossError("the job's last checkpoint ckpt-" + std::to_string(step) +
                        " could not be evaluated: " + std::string(skipped.Why(step).message()))};
}

JobEndWatch::Verdict JobEndWatch::Check(const Listing& listing, int64_t evaluated_through,
                                        const SkippedCheckpoints& skipped, int64_t evaluations) {
  // The job has ended (training-done) and its last checkpoint is evaluated,
  // now or by an earlier run: nothing follows.
  auto done = TrainingDone::Read(env_, run_dir_);
  const bool recorded = done.ok() && done->has_value();
  if (done.ok() && !recorded) initial_run_.reset();  // removed: a chief is training
  const bool this_run = recorded && (!initial_run_ || (*done)->run != *initial_run_);
  // The job's last checkpoint skipped, but written again since: the next
  // poll retries it. Skipped once: the next poll looks at it again.
  const bool last_skipped = recorded && skipped.Contains((*done)->step);
  const bool last_rewritten = recorded && skipped.WrittenAgain((*done)->step);
  const bool last_in_doubt = last_skipped && !skipped.Confirmed((*done)->step);
  // Reached: evaluated, or skipped as damaged (listed or loaded) on two looks.
  const bool reached = recorded && !last_in_doubt && ((*done)->step <= evaluated_through || last_skipped);
  if (reached && !last_rewritten &&
      (this_run || !beside_a_job_ || std::chrono::steady_clock::now() - quiet_since_ >= kQuietGrace)) {
    // The job's last checkpoint was skipped, not evaluated: say so.
    if (last_skipped) return Lost((*done)->step, skipped);
    if (evaluations == 0) {
      PrintLine("the job's last checkpoint ckpt-" + std::to_string((*done)->step) +
                " was evaluated before (recorded in the evaluator lease): nothing new to evaluate");
    }
    return {Outcome::kEnded, (*done)->step, OkStatus()};
  }
  if (!done.ok() && !said_done_unreadable_) {
    said_done_unreadable_ = true;
    MIRRORED_LOG(WARNING) << "cannot read the job's training-done record (" << done.status()
                          << "): the newest checkpoint's \"final\" mark (its state.json) tells when to stop";
  }
  if (!recorded && !beside_a_job_ && listing.complete.ok()) {
    if (std::optional<Verdict> marked = CheckFinalMark(listing, evaluated_through, skipped, evaluations)) {
      return *marked;
    }
  }
  if (reached && !last_rewritten && !said_quiet_grace_) {
    // Waiting out kQuietGrace: say why this evaluator does not end yet.
    said_quiet_grace_ = true;
    PrintLine("the job's last checkpoint ckpt-" + std::to_string((*done)->step) +
              " is evaluated, but its training-done record predates this evaluator: waiting up to " +
              std::to_string(kQuietGrace.count()) + " s for the job's chief to start again before stopping");
  }
  return {};
}

std::optional<JobEndWatch::Verdict> JobEndWatch::CheckFinalMark(const Listing& listing, int64_t evaluated_through,
                                                                const SkippedCheckpoints& skipped,
                                                                int64_t evaluations) {
  // The newest checkpoint whose state.json was read, loadable or damaged.
  // A damaged one whose state.json cannot be read says nothing of the job's
  // end (a chief resumes from before it, and writes it anew): passed over
  // once its second look found it so.
  std::optional<int64_t> newest;
  bool newest_final = false;
  if (!listing.complete->empty()) {
    newest = listing.complete->back().step;
    newest_final = listing.complete->back().state.final;
  }
  std::optional<int64_t> newest_unread;  // seen once only, with no state.json read
  for (const CheckpointReader::Skipped& d : listing.damaged) {
    if (!d.state) {
      if (skipped.Contains(d.step) && !skipped.Confirmed(d.step)) {
        newest_unread = std::max(newest_unread.value_or(-1), d.step);
      }
      continue;
    }
    if (!newest || d.step > *newest) newest = d.step, newest_final = d.state->final;
  }
  if (!newest || !newest_final || (newest_unread && *newest_unread > *newest)) return std::nullopt;
  // Reached: evaluated, or skipped as damaged (listed or loaded) on two
  // looks, a poll apart.
  if (skipped.Contains(*newest) ? !skipped.Confirmed(*newest) : *newest > evaluated_through) return std::nullopt;
  // It is not the end if a chief has started from it since (its
  // training-start record: it trains on) or holds the run directory
  // (started, about to write that record).
  auto start = TrainingStart::Read(env_, run_dir_);
  if (start.ok() && *start && (*start)->from_step >= *newest) return std::nullopt;
  if (RunDirLock::ChiefLockHeld(run_dir_)) return std::nullopt;
  if (skipped.Contains(*newest)) return Lost(*newest, skipped);
  if (evaluations == 0) {
    PrintLine("the job's last checkpoint ckpt-" + std::to_string(*newest) +
              " (final in its state.json) was evaluated before (recorded in the evaluator lease): nothing new to "
              "evaluate");
  }
  return Verdict{Outcome::kEnded, *newest, OkStatus()};
}

}  // namespace mirrored
