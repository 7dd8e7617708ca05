#include "worker/train/chief_log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "common/logging.h"

namespace mirrored {
namespace {

double FloatPrecision(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.7g", v);
  return std::strtod(buf, nullptr);
}

}  // namespace

Status ChiefLog::Open(const std::string& run_dir) {
  if (run_dir.empty()) return OkStatus();
  MIRRORED_ASSIGN_OR_RETURN(metrics_, MetricsLog::Open(run_dir + "/metrics.jsonl"));
  // The event file is made with the first event (a run with nothing left
  // to train leaves no empty one); its directory now, so that one that
  // cannot be made fails before training.
  events_dir_ = run_dir + "/logs/train";
  std::error_code made;
  std::filesystem::create_directories(events_dir_, made);
  if (made) return InternalError("cannot create log directory " + events_dir_ + ": " + made.message());
  return OkStatus();
}

Status ChiefLog::Train(int64_t step, int64_t total, int64_t epoch, double loss, double acc, double sps,
                       double step_ms, double lr, std::optional<LossScaleFigures> loss_scale) {
  std::ostringstream line;
  line << std::fixed << "step " << step << "/" << total << " epoch " << epoch + 1 << " loss "
       << std::setprecision(4) << loss << " " << metric_ << " " << acc << " samples/s " << std::setprecision(0) << sps;
  if (loss_scale) {
    line << " loss_scale " << std::setprecision(0) << loss_scale->scale;
    if (loss_scale->skipped_steps > 0) {
      line << " (" << loss_scale->skipped_steps << " step" << (loss_scale->skipped_steps == 1 ? "" : "s")
           << " skipped)";
    }
  }
  Print(line.str());
  if (metrics_) {
    nlohmann::json record = {{"kind", "train"}, {"step", step}, {"epoch", epoch + 1},
                             {"loss", FloatPrecision(loss)}, {metric_, FloatPrecision(acc)},
                             {"samples_per_sec", sps}, {"step_time_ms", step_ms},
                             {"learning_rate", FloatPrecision(lr)}};
    if (loss_scale) {
      record["loss_scale"] = loss_scale->scale;
      record["skipped_steps"] = loss_scale->skipped_steps;
    }
    MIRRORED_RETURN_IF_ERROR(metrics_->Append(record));
  }
  if (!events_dir_.empty()) {
    MIRRORED_RETURN_IF_ERROR(OpenEvents());
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("loss", step, static_cast<float>(loss)));
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar(metric_, step, static_cast<float>(acc)));
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("samples_per_sec", step, static_cast<float>(sps)));
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("step_time_ms", step, static_cast<float>(step_ms)));
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("learning_rate", step, static_cast<float>(lr)));
    if (loss_scale) {
      MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("loss_scale", step, static_cast<float>(loss_scale->scale)));
    }
    MIRRORED_RETURN_IF_ERROR(events_->Flush());
  }
  return OkStatus();
}

Status ChiefLog::Starting(int64_t step, const std::string& checkpoint_dir) {
  if (metrics_) {
    MIRRORED_ASSIGN_OR_RETURN(MetricsLog::Removed removed, metrics_->SupersedeAfter(step));
    if (removed.later > 0) {
      MIRRORED_LOG(INFO) << "metrics.jsonl: removed " << removed.later << " line(s) of steps after " << step
                         << ", logged by an earlier run that "
                         << (checkpoint_dir.empty() ? "left no checkpoint to resume from"
                                                    : "went past this checkpoint (its later ones are lost)");
    }
    if (removed.damaged > 0) {
      MIRRORED_LOG(WARNING) << "metrics.jsonl: removed " << removed.damaged
                            << " damaged line(s) (cut short, or not a JSON object: a writer that crashed "
                               "mid-line, or an edit)";
    }
  }
  // Written with the first event of this run.
  if (!events_dir_.empty()) pending_start_ = std::make_pair(step + 1, checkpoint_dir);
  return OkStatus();
}

StatusOr<bool> ChiefLog::HasValidation(int64_t step) {
  if (!metrics_) return false;
  return metrics_->Has("validation", step);
}

Status ChiefLog::Validation(int64_t step, int64_t epoch, double loss, double acc) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "epoch " << epoch + 1 << " validation: val_loss " << loss
       << " val_" << metric_ << " " << acc;
  Print(line.str());
  if (metrics_) {
    MIRRORED_RETURN_IF_ERROR(metrics_->Append(
        {{"kind", "validation"}, {"step", step}, {"epoch", epoch + 1}, {"loss", FloatPrecision(loss)},
         {metric_, FloatPrecision(acc)}}));
  }
  if (!events_dir_.empty()) {
    MIRRORED_RETURN_IF_ERROR(OpenEvents());
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("val_loss", step, static_cast<float>(loss)));
    MIRRORED_RETURN_IF_ERROR(events_->WriteScalar("val_" + metric_, step, static_cast<float>(acc)));
    MIRRORED_RETURN_IF_ERROR(events_->Flush());
  }
  return OkStatus();
}

void ChiefLog::Print(const std::string& text) {
  std::string line = text + "\n";
  (void)!write(STDOUT_FILENO, line.data(), line.size());
}

Status ChiefLog::OpenEvents() {
  if (events_ == nullptr) {
    MIRRORED_ASSIGN_OR_RETURN(events_, EventWriter::Create(events_dir_));
  }
  if (pending_start_) {
    MIRRORED_RETURN_IF_ERROR(events_->WriteSessionStart(pending_start_->first, pending_start_->second));
    pending_start_.reset();
  }
  return OkStatus();
}

}  // namespace mirrored
