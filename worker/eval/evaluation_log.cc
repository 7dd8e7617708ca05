#include "worker/eval/evaluation_log.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"

namespace mirrored {

void PrintLine(const std::string& text) {
  std::string line = text + "\n";
  (void)!write(STDOUT_FILENO, line.data(), line.size());
}

StatusOr<std::unique_ptr<EvaluationLog>> EvaluationLog::Open(const std::string& run_dir) {
  MIRRORED_ASSIGN_OR_RETURN(std::unique_ptr<MetricsLog> metrics, MetricsLog::Open(run_dir + "/metrics.jsonl"));
  std::unique_ptr<EvaluationLog> log(new EvaluationLog(run_dir, std::move(metrics)));
  std::error_code made;
  std::filesystem::create_directories(log->EventsDir(), made);
  if (made) return InternalError("cannot create log directory " + log->EventsDir() + ": " + made.message());
  return log;
}

void EvaluationLog::RestartedFrom(int64_t from_step) {
  session_start_due_ = true;
  session_start_ = from_step + 1;
}

Status EvaluationLog::Record(const CheckpointInfo& checkpoint, bool final, double loss, double accuracy) {
  const int64_t step = checkpoint.step;
  const CheckpointState& st = checkpoint.state;
  // The epoch the checkpoint's last step belongs to, counted from 1, as in
  // the chief's train and validation lines.
  const int64_t epoch = st.epoch + (st.step_in_epoch == 0 ? 0 : 1);
  // The metric of the checkpoint's loss: accuracy, or mse (--loss mse).
  const std::string metric = st.loss == "mse" ? "mse" : "accuracy";
  char line[256];
  std::snprintf(line, sizeof(line), "evaluated %s checkpoint ckpt-%lld (epoch %lld): loss %.4f %s %.4f",
                final ? "final" : "", static_cast<long long>(step), static_cast<long long>(epoch), loss,
                metric.c_str(), accuracy);
  std::string text(line);
  if (!final) text.replace(text.find("evaluated  "), 11, "evaluated ");
  PrintLine(text);
  // One line per checkpoint: an evaluator stopped (SIGKILL) between its
  // line and its lease update evaluated this one already.
  MIRRORED_ASSIGN_OR_RETURN(bool logged, metrics_->Has("eval", step));
  if (logged) {
    MIRRORED_LOG(INFO) << "metrics.jsonl already has ckpt-" << step
                       << "'s eval line (an earlier evaluator stopped before recording it in its lease)";
  } else {
    MIRRORED_RETURN_IF_ERROR(metrics_->Append({{"kind", "eval"}, {"step", step}, {"epoch", epoch}, {"loss", loss},
                                               {metric, accuracy}, {"checkpoint", "ckpt-" + std::to_string(step)}}));
  }
  if (events_ == nullptr) {
    MIRRORED_ASSIGN_OR_RETURN(events_, EventWriter::Create(EventsDir()));
  }
  if (session_start_due_) {
    // After a restart, at the restart's step + 1 even when this record is an
    // older checkpoint's (a second look, evaluated after newer ones): a
    // START at its step would discard the points of the steps between,
    // evaluated before and not again. Steps out of order are fine otherwise:
    // an event file of version 2 is purged on a START only, not on a step
    // smaller than the one before (TensorBoard's EventAccumulator).
    const int64_t at = session_start_ < 0 ? step : session_start_;
    MIRRORED_RETURN_IF_ERROR(
        events_->WriteSessionStart(at, CheckpointsDir(run_dir_) + "/" + CheckpointDirName(step)));
    session_start_due_ = false;
  }
  MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("loss", step, static_cast<float>(loss)));
  MIRRORED_RETURN_IF_ERROR(events_->WriteScalar(metric, step, static_cast<float>(accuracy)));
  return WhileRunning(events_->Flush());
}

}  // namespace mirrored
