// Where the evaluator records each evaluation: a line on stdout, one "eval"
// line per checkpoint in RUN_DIR/metrics.jsonl, and the chief's tags (loss,
// accuracy) in RUN_DIR/logs/eval's TensorBoard events, so that TensorBoard
// draws the evaluation in the training curves' charts, as for an
// Estimator's eval directory.
//
//   MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<EvaluationLog> log, EvaluationLog::Open(run_dir));
//   MIRRORED_RETURN_IF_ERROR(log->Record(info, /*final=*/true, loss, accuracy));
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/run_dir/checkpoint_reader.h"
#include "common/status.h"
#include "worker/summary/event_writer.h"
#include "worker/summary/metrics_log.h"

namespace mirrored {

// Writes `text` and a newline to stdout in one write(2) (the launcher
// prefixes whole lines).
void PrintLine(const std::string& text);

class EvaluationLog {
 public:
  // Opens metrics.jsonl and makes logs/eval, whose event file is made with
  // the first record (a run with nothing new to evaluate leaves no empty
  // one): a log directory that cannot be made fails the set-up, not the
  // first result. Errors: Internal naming the file or directory.
  static StatusOr<std::unique_ptr<EvaluationLog>> Open(const std::string& run_dir);

  // Records the evaluation of `checkpoint` ("final": the job's last one).
  // `accuracy` is the mse of a checkpoint trained with --loss mse (its
  // state's "loss"), and named so.
  // Its metrics.jsonl line is written unless one is there already (an
  // evaluator stopped between its line and its lease update). Errors: the
  // files' (Internal, or Unavailable for a run directory that fails).
  Status Record(const CheckpointInfo& checkpoint, bool final, double loss, double accuracy);

  // The job started again from `from_step`, behind what was evaluated: the
  // next record tells TensorBoard to drop the points after from_step.
  void RestartedFrom(int64_t from_step);

 private:
  EvaluationLog(std::string run_dir, std::unique_ptr<MetricsLog> metrics)
      : run_dir_(std::move(run_dir)), metrics_(std::move(metrics)) {}
  std::string EventsDir() const { return run_dir_ + "/logs/eval"; }

  const std::string run_dir_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<EventWriter> events_;  // made with the first record
  // TensorBoard's view of logs/eval: a SessionLog START before this run's
  // first point (at its step), and again after the job restarted behind
  // what was evaluated (at the restart's step + 1, whatever the step of the
  // next record), discards the points written before (by an earlier
  // evaluator, or this one) for the steps evaluated again, so each step
  // shows once, as the chief does in logs/train. -1: at the first evaluated
  // step.
  bool session_start_due_ = true;
  int64_t session_start_ = -1;
};

}  // namespace mirrored
