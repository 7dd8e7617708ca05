// ChiefLog: what the chief writes while training: the progress and
// validation lines on stdout, metrics.jsonl and the TensorBoard events
// (logs/train). Without a run directory, the lines alone. Loss and accuracy
// come from float32 sums: metrics.jsonl gets them with float's precision
// (0.8436, not 0.8435999751091003).
//
//   ChiefLog log;
//   MIRRORED_RETURN_IF_ERROR(log.Open(options.run_dir));
//   MIRRORED_RETURN_IF_ERROR(log.Starting(resumed_step, resumed_dir));
//   MIRRORED_RETURN_IF_ERROR(log.Train(step, total, epoch, loss, acc, samples_per_sec, step_ms, lr));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"
#include "worker/summary/event_writer.h"
#include "worker/summary/metrics_log.h"

namespace mirrored {

// fp16's dynamic loss scale at a progress line, and the steps skipped for
// non-finite gradients since the process started.
struct LossScaleFigures {
  double scale = 0;
  int64_t skipped_steps = 0;
};

class ChiefLog {
 public:
  // Opens `run_dir`/metrics.jsonl and makes logs/train ("" : lines only).
  // The event file itself is made with the first event (a run with nothing
  // left to train leaves no empty one). Errors: the file's, or Internal for
  // a log directory that cannot be made.
  Status Open(const std::string& run_dir);
  // The metric's name in the lines, metrics.jsonl and the events:
  // "accuracy" (the default) or "mse" (--loss mse).
  void set_metric(std::string name) { metric_ = std::move(name); }
  // A progress line: "step 100/1000 epoch 1 loss 0.5123 accuracy 0.8123
  // samples/s 12345", with the same scalars in metrics.jsonl and the events.
  // `epoch` counts from 0 (printed from 1). With `loss_scale` (fp16), the
  // line ends "loss_scale 32768 (1 step skipped)", and metrics.jsonl and
  // the events get loss_scale and skipped_steps too.
  Status Train(int64_t step, int64_t total, int64_t epoch, double loss, double acc, double sps, double step_ms,
               double lr, std::optional<LossScaleFigures> loss_scale = std::nullopt);
  // Training starts after `step` (the checkpoint `checkpoint_dir` resumed
  // from, or 0 and "" without one): what an earlier run logged after it is
  // trained again, so TensorBoard drops those events and metrics.jsonl
  // those lines (an earlier attempt that died before its first checkpoint
  // included).
  // `checkpoint_dir` "" (and step 0): a fresh start, with no checkpoint.
  Status Starting(int64_t step, const std::string& checkpoint_dir);
  // Whether metrics.jsonl has a validation line for `step` (false without one).
  StatusOr<bool> HasValidation(int64_t step);
  // "epoch 1 validation: val_loss 0.4000 val_accuracy 0.8500", and the same
  // in metrics.jsonl and the events.
  Status Validation(int64_t step, int64_t epoch, double loss, double acc);

 private:
  static void Print(const std::string& text);
  // The event file, and Starting's SessionLog START first in it.
  Status OpenEvents();

  std::unique_ptr<MetricsLog> metrics_;
  std::string events_dir_;  // "" without a run directory
  std::unique_ptr<EventWriter> events_;
  std::optional<std::pair<int64_t, std::string>> pending_start_;
  std::string metric_ = "accuracy";
};

}  // namespace mirrored
