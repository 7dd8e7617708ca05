#include "worker/eval/checkpoint_follower.h"

#include <algorithm>
#include <set>

#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"
#include "common/signal_name.h"
#include "worker/checkpoint/evaluator_lease.h"
#include "worker/checkpoint/training_start.h"
#include "worker/eval/stop_signal.h"

namespace mirrored {

CheckpointFollower::CheckpointFollower(FileEnv* env, const EvaluatorOptions& options, EvaluatorProgress progress,
                                       TestSetEvaluator& evaluator, EvaluationLog& log, JobEndWatch watch)
    : env_(env),
      options_(options),
      evaluator_(evaluator),
      log_(log),
      watch_(std::move(watch)),
      reader_(env, options.run_dir, /*model_only=*/true),
      skipped_(options.run_dir),
      done_step_(progress.done_step),
      evaluated_step_(progress.done_step),
      start_run_(std::move(progress.start_run)),
      pruned_floor_(progress.done_step) {
  summary_.evaluated_before = done_step_;
}

StatusOr<EvaluationSummary> CheckpointFollower::Run() {
  const auto poll = std::chrono::duration_cast<std::chrono::milliseconds>(options_.poll_interval);
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.eval_timeout);
  MIRRORED_LOG(INFO) << "evaluator following " << options_.run_dir << "/checkpoints every "
                     << options_.poll_interval.count() << " s";
  bool looked_again_at_the_end = false;
  bool looked_again_at_timeout = false;  // reset by each evaluation
  while (true) {
    FollowRestart();
    std::vector<CheckpointReader::Skipped> damaged;
    const StatusOr<std::vector<CheckpointInfo>> listed = reader_.ListComplete(&damaged);
    NoteEvaluatedBefore(listed);
    NotePruned(listed, damaged);
    const std::vector<CheckpointInfo> pending = Pending(listed, damaged);
    const int64_t evaluations_before = summary_.evaluations;
    for (const CheckpointInfo& info : pending) {  // ascending by step
      if (std::optional<int> sig = StopSignal::Received()) return StoppedBySignal(*sig);
      MIRRORED_RETURN_IF_ERROR(EvaluateOne(info, info.step == pending.back().step));
      // At once, even with checkpoints due for their second look (which could
      // evaluate one more): the last line names them as not evaluated.
      if (options_.max_evaluations > 0 && summary_.evaluations >= options_.max_evaluations) {
        return Finish("--max-evaluations");
      }
    }
    if (summary_.evaluations > evaluations_before) looked_again_at_timeout = false;
    const JobEndWatch::Verdict end = watch_.Check({listed, damaged}, done_step_, skipped_, summary_.evaluations);
    if (end.outcome == JobEndWatch::Outcome::kLastCheckpointLost) {
      (void)EvaluatorLease::Stop(env_, options_.run_dir);
      return end.lost;
    }
    if (end.outcome == JobEndWatch::Outcome::kEnded) {
      // Older checkpoints seen damaged or gone once have had no second look
      // yet: one more poll gives them theirs (one being replaced may be
      // whole by then), instead of counting them as skipped.
      if (const std::vector<int64_t> tentative = skipped_.Tentative(); !tentative.empty() && !looked_again_at_the_end) {
        looked_again_at_the_end = true;
        MIRRORED_LOG(INFO) << "the job's last checkpoint ckpt-" << end.final_step << " is reached; looking at ckpt-"
                           << tentative.front() << (tentative.size() > 1 ? " and others" : "")
                           << ", skipped once, again in " << options_.poll_interval.count() << " s before stopping";
        if (std::optional<int> sig = StopSignal::WaitFor(poll)) return StoppedBySignal(*sig);
        continue;
      }
      summary_.saw_final = true;
      summary_.final_step = end.final_step;
      return Finish("the job's end");
    }
    if (timeout.count() > 0 && Clock::now() - last_progress_ >= timeout) {
      // As at the job's end: checkpoints seen damaged or gone once get their
      // second look a poll later (one found whole is progress, and the
      // timeout starts again), instead of being counted as skipped on one
      // look.
      if (const std::vector<int64_t> tentative = skipped_.Tentative();
          !tentative.empty() && !looked_again_at_timeout) {
        looked_again_at_timeout = true;
        MIRRORED_LOG(INFO) << "no new checkpoint evaluated for " << options_.eval_timeout.count()
                           << " s (--eval-timeout); looking at ckpt-" << tentative.front()
                           << (tentative.size() > 1 ? " and others" : "") << ", skipped once, again in "
                           << options_.poll_interval.count() << " s before stopping";
        if (std::optional<int> sig = StopSignal::WaitFor(poll)) return StoppedBySignal(*sig);
        continue;
      }
      MIRRORED_LOG(WARNING) << "no new checkpoint for " << options_.eval_timeout.count()
                            << " s (--eval-timeout): stopping after " << summary_.evaluations << " evaluation(s)";
      return Finish("--eval-timeout");
    }
    // Polling is the contract (--poll-interval): the run directory may be on
    // another machine's file system, with nothing to wait on. A stop signal
    // ends the wait.
    if (std::optional<int> sig = StopSignal::WaitFor(poll)) return StoppedBySignal(*sig);
  }
}

void CheckpointFollower::FollowRestart() {
  // The checkpoints after the start's step are new ones (their eval lines
  // went with the old ones'). Read before listing: the record precedes
  // every checkpoint of its run.
  auto start = TrainingStart::Read(env_, options_.run_dir);
  if (!start.ok() || !*start || (*start)->run == start_run_) return;
  if ((*start)->from_step < done_step_) {
    MIRRORED_LOG(INFO) << "the job started again from step " << (*start)->from_step << ", behind ckpt-" << done_step_
                       << " evaluated before: evaluating its checkpoints after step " << (*start)->from_step;
    done_step_ = (*start)->from_step;
    evaluated_step_ = std::min(evaluated_step_, done_step_);
    skipped_.RemoveAfter(done_step_);
    pruned_floor_ = std::min(pruned_floor_, done_step_);
    // Steps after it are the new run's, whatever this evaluator saw of the old.
    seen_.erase(seen_.upper_bound(done_step_), seen_.end());
    pruned_unseen_.erase(pruned_unseen_.upper_bound(done_step_), pruned_unseen_.end());
    log_.RestartedFrom((*start)->from_step);
    if (summary_.evaluations == 0) {
      summary_.evaluated_before = done_step_;
      summary_.evaluated_before_final = false;
    }
  }
  start_run_ = (*start)->run;
}

void CheckpointFollower::NoteEvaluatedBefore(const StatusOr<std::vector<CheckpointInfo>>& listed) {
  if (summary_.evaluations > 0 || summary_.evaluated_before < 0 || !listed.ok() || listed->empty()) return;
  // The newest listed, marked final: the last of the run that wrote it.
  summary_.evaluated_before_final =
      listed->back().step == summary_.evaluated_before && listed->back().state.final;
}

void CheckpointFollower::NotePruned(const StatusOr<std::vector<CheckpointInfo>>& listed,
                                    const std::vector<CheckpointReader::Skipped>& damaged) {
  std::set<int64_t> now;  // listed on this poll, whole or damaged
  if (listed.ok())
    for (const CheckpointInfo& info : *listed) now.insert(info.step);
  for (const CheckpointReader::Skipped& d : damaged) now.insert(d.step);
  for (int64_t step : now) {
    seen_.insert(step);
    pruned_unseen_.erase(step);  // there after all (written again by a new run)
  }
  // Read after listing: one pruned in between was never listed, and is
  // named; one listed, then pruned, is skipped when it fails to load.
  StatusOr<CheckpointIndex> index = CheckpointIndex::Read(env_, options_.run_dir);
  if (!index.ok()) return;  // none yet, or damaged: the chief rewrites it at its next checkpoint
  std::vector<int64_t> fresh;
  for (int64_t step : index->pruned) {
    if (step <= pruned_floor_ || seen_.count(step) > 0 || pruned_unseen_.count(step) > 0 ||
        std::binary_search(index->kept.begin(), index->kept.end(), step)) {
      continue;
    }
    pruned_unseen_.insert(step);
    fresh.push_back(step);
  }
  if (fresh.empty()) return;
  std::string names;
  for (size_t i = 0; i < fresh.size() && i < 4; ++i) {
    names += (i == 0 ? "" : i + 1 == fresh.size() ? " and " : ", ") + CheckpointDirName(fresh[i]);
  }
  if (fresh.size() > 4) names += " ... " + CheckpointDirName(fresh.back()) + " (" + std::to_string(fresh.size()) + " in all)";
  MIRRORED_LOG(WARNING) << names << (fresh.size() == 1 ? " was" : " were")
                        << " pruned by the chief before this evaluator could evaluate "
                        << (fresh.size() == 1 ? "it" : "them") << " (the chief keeps the newest --keep-checkpoints, "
                        << "and while an evaluator follows the job, its backlog among the newest 2 x "
                        << "--keep-checkpoints: start the evaluator with the job to see every one)";
}

std::vector<CheckpointInfo> CheckpointFollower::Pending(const StatusOr<std::vector<CheckpointInfo>>& listed,
                                                        const std::vector<CheckpointReader::Skipped>& damaged) {
  std::set<int64_t> seen;  // listed now, whole or damaged
  // Damaged where they lie (a truncated file): skipped, said once, like one
  // that fails to load; found so again on the next poll (or rewritten and
  // found so twice), skipped for good.
  for (const CheckpointReader::Skipped& d : damaged) {
    seen.insert(d.step);
    if (skipped_.Contains(d.step)) {
      if (!skipped_.Confirmed(d.step) || skipped_.WrittenAgain(d.step)) skipped_.Add(d.step, d.why);
      continue;
    }
    if (d.step <= done_step_) continue;
    MIRRORED_LOG(WARNING) << "skipping ckpt-" << d.step << ": " << d.why;
    skipped_.Add(d.step, d.why);
  }
  std::vector<CheckpointInfo> pending;
  if (listed.ok()) {
    for (const CheckpointInfo& info : *listed) {
      seen.insert(info.step);
      const bool rewritten = skipped_.WrittenAgain(info.step);
      if (rewritten) {
        MIRRORED_LOG(INFO) << "ckpt-" << info.step << ", skipped as unreadable, was written again: retrying it";
        skipped_.Remove(info.step);
      }
      // Skipped on the last poll, whole now: the second look loads it.
      const bool second_look = skipped_.Contains(info.step) && !skipped_.Confirmed(info.step);
      if (second_look && info.step <= done_step_) {
        MIRRORED_LOG(INFO) << "ckpt-" << info.step << ", skipped on the last poll, is listed whole now (a checkpoint "
                           << "being replaced can be caught mid-way): loading it again";
      }
      if (info.step > done_step_ || rewritten || second_look) pending.push_back(info);
    }
    // Skipped on the last poll and gone now: that is its second look.
    for (int64_t step : skipped_.Tentative()) {
      if (seen.count(step) == 0) skipped_.Add(step, skipped_.Why(step));
    }
  } else if (listed.status().code() != StatusCode::kNotFound) {
    MIRRORED_LOG(WARNING) << "cannot list checkpoints: " << listed.status();
  }
  return pending;
}

Status CheckpointFollower::EvaluateOne(const CheckpointInfo& info, bool last_pending) {
  MIRRORED_RETURN_IF_ERROR(WhileRunning(EvaluatorLease::Acquire(env_, options_.run_dir, info.step)));
  auto loaded = reader_.Load(info.step);
  if (!loaded.ok()) {
    // Pruned or damaged between listing and loading: skip it, never
    // evaluate a partial one.
    if (skipped_.Contains(info.step)) {
      MIRRORED_LOG(WARNING) << "skipping ckpt-" << info.step << " (again on a second look): " << loaded.status();
    } else if (loaded.status().code() == StatusCode::kNotFound) {
      MIRRORED_LOG(WARNING) << "skipping ckpt-" << info.step << ": the chief removed it before it could be "
                            << "evaluated (this evaluator fell more than 2 x --keep-checkpoints behind; "
                            << loaded.status().message() << ")";
    } else {
      MIRRORED_LOG(WARNING) << "skipping ckpt-" << info.step << ": " << loaded.status();
    }
    skipped_.Add(info.step, loaded.status());
    done_step_ = std::max(done_step_, info.step);
    // Skipped for good: the chief need not keep it for this evaluator any
    // more, but it is no progress (MarkEvaluated would record it as
    // evaluated). Skipped once, the lease's "reading" keeps it until its
    // second look, unless a newer checkpoint's Acquire takes its place.
    if (skipped_.Confirmed(info.step)) {
      MIRRORED_RETURN_IF_ERROR(WhileRunning(EvaluatorLease::Release(env_, options_.run_dir, info.step)));
    }
    return OkStatus();
  }
  MIRRORED_ASSIGN_OR_RETURN(TestSetEvaluator::Result result, evaluator_.Evaluate(*loaded));
  // "final": the last checkpoint of the run that wrote it, unless a later
  // one is already there (a run extended after it ended).
  const bool final = loaded->info.state.final && last_pending;
  MIRRORED_RETURN_IF_ERROR(log_.Record(loaded->info, final, result.loss, result.accuracy));
  done_step_ = std::max(done_step_, info.step);  // a retried one may be older
  skipped_.Remove(info.step);                     // a second look that found it whole
  // The newest step evaluated, not done_step_: that one may have been
  // skipped (a second look evaluates an older checkpoint after newer ones).
  evaluated_step_ = std::max(evaluated_step_, info.step);
  MIRRORED_RETURN_IF_ERROR(
      WhileRunning(EvaluatorLease::MarkEvaluated(env_, options_.run_dir, evaluated_step_, start_run_)));
  last_progress_ = Clock::now();
  watch_.Progressed();
  ++summary_.evaluations;
  // The newest step's result: a second look can evaluate an older
  // checkpoint after a newer one.
  if (info.step > summary_.last_step) {
    summary_.last_step = info.step;
    summary_.last_loss = result.loss;
    summary_.last_accuracy = result.accuracy;
    summary_.metric = loaded->info.state.loss == "mse" ? "mse" : "accuracy";
    summary_.last_final = final;
  }
  return OkStatus();
}

void CheckpointFollower::NoteSkipped(const std::string& stopped_by) {
  // Skipped and not evaluated since: on two looks (or written again and
  // skipped again), and those still due for their second look.
  summary_.unsettled = skipped_.Tentative();
  summary_.skipped = skipped_.size() - static_cast<int64_t>(summary_.unsettled.size());
  summary_.pruned.assign(pruned_unseen_.begin(), pruned_unseen_.end());
  summary_.stopped_by = stopped_by;
}

EvaluationSummary CheckpointFollower::Finish(const std::string& stopped_by) {
  NoteSkipped(stopped_by);
  // An evaluator that fails while evaluating keeps its lease, for its
  // restart; not being able to end it does not undo the evaluations: a
  // warning.
  if (Status s = EvaluatorLease::Stop(env_, options_.run_dir); !s.ok()) {
    MIRRORED_LOG(WARNING) << "could not end the evaluator's lease (the chief keeps up to 2 x --keep-checkpoints "
                             "for it until it is deleted or an evaluator ends normally): "
                          << s;
  }
  return summary_;
}

EvaluationSummary CheckpointFollower::StoppedBySignal(int sig) {
  MIRRORED_LOG(WARNING) << "stopping on " << SignalName(sig) << " after " << summary_.evaluations << " evaluation(s)";
  summary_.stop_signal = sig;
  NoteSkipped(SignalName(sig));
  // Stopped before the end (the launcher stopping or restarting the job, a
  // Ctrl-C): the chief goes on keeping the checkpoints not evaluated yet
  // (up to 2 x --keep-checkpoints), for the evaluator started again.
  if (Status s = EvaluatorLease::Pause(env_, options_.run_dir); !s.ok()) {
    MIRRORED_LOG(WARNING) << "could not update the evaluator's lease: " << s;
  }
  return summary_;
}

}  // namespace mirrored
