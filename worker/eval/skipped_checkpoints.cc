#include "worker/eval/skipped_checkpoints.h"

#include "worker/checkpoint/checkpoint_index.h"

namespace mirrored {

void SkippedCheckpoints::Add(int64_t step, Status why) { entries_[step] = Entry{std::move(why), Written(step)}; }

bool SkippedCheckpoints::WrittenAgain(int64_t step) const {
  auto it = entries_.find(step);
  return it != entries_.end() && Written(step) != it->second.written;
}

SkippedCheckpoints::WriteTime SkippedCheckpoints::Written(int64_t step) const {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(CheckpointsDir(run_dir_) + "/" + CheckpointDirName(step), ec);
  if (ec) return std::nullopt;
  return t;
}

}  // namespace mirrored
