#include "worker/eval/skipped_checkpoints.h"

#include "common/run_dir/checkpoint_index.h"

namespace mirrored {

void SkippedCheckpoints::Add(int64_t step, Status why) {
  const WriteTime written = Written(step);
  auto it = entries_.find(step);
  // The same writing seen so again, or gone since (pruned, or removed by a
  // chief redoing the step): either way the second look found nothing to
  // evaluate. Gone, its write time is forgotten: should it come back, it is
  // written again (WrittenAgain) and retried.
  if (it != entries_.end() && (it->second.written == written || !written)) {
    it->second.why = std::move(why);
    it->second.written = written;
    ++it->second.sightings;
    return;
  }
  entries_[step] = Entry{std::move(why), written};
}

bool SkippedCheckpoints::Confirmed(int64_t step) const {
  auto it = entries_.find(step);
  return it != entries_.end() && it->second.sightings >= 2;
}

std::vector<int64_t> SkippedCheckpoints::Tentative() const {
  std::vector<int64_t> steps;
  for (const auto& [step, entry] : entries_) {
    if (entry.sightings < 2) steps.push_back(step);
  }
  return steps;
}

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
