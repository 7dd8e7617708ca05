#include "worker/train/diverged_error.h"

#include <cmath>
#include <sstream>

namespace mirrored {
namespace {

constexpr char kDivergedPrefix[] = "training diverged: ";

}  // namespace

Status DivergedError(std::optional<float> mean_loss, int64_t first, int64_t last, int64_t epoch,
                     int64_t last_checkpoint, bool chief, const TrainerOptions& options) {
  std::ostringstream m;
  m << kDivergedPrefix;
  if (!mean_loss) {
    m << "the weights after step " << last << " are not finite";
  } else {
    m << "the mean loss over step" << (first == last ? " " : "s ") << first;
    if (first != last) m << "-" << last;
    m << " is " << (std::isnan(*mean_loss) ? "nan" : *mean_loss > 0 ? "inf" : "-inf");
  }
  m << " (epoch " << epoch + 1 << "); stopped before checkpointing them. ";
  if (!chief) {
    m << "The chief's log names its latest checkpoint, from before, if it wrote one (run again to resume from it).";
  } else if (options.checkpoints.run_dir.empty()) {
    m << "Nothing is saved (no --run-dir).";
  } else if (last_checkpoint < 0) {
    m << "No checkpoint was written yet.";
  } else {
    m << "The latest checkpoint, ckpt-" << last_checkpoint << ", is from before; run again to resume from it.";
  }
  m << " Try a lower --lr (now " << options.optimizer.EffectiveLearningRate() << ", " << options.optimizer.name << ").";
  // A configuration error (exit 2): a restart with the same flags replays
  // the same steps bit for bit, so the launcher must not retry it.
  return InvalidArgumentError(m.str());
}

bool IsDivergedError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument && s.message().starts_with(kDivergedPrefix);
}

}  // namespace mirrored
