// The checkpoints an evaluator passed over, damaged or gone, each with why
// and when its directory was written: one seen so once is looked at again a
// poll later (a checkpoint being replaced by a chief redoing its step can be
// caught mid-swap), one written again since (a resumed job redoing that
// step) is retried, and a job's last checkpoint that was skipped on both
// looks is reported with its reason.
//
//   SkippedCheckpoints skipped(run_dir);
//   skipped.Add(30, loaded.status());                 // seen damaged: tentative
//   if (skipped.Confirmed(30)) ... still damaged a poll later
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored {

class SkippedCheckpoints {
 public:
  explicit SkippedCheckpoints(std::string run_dir) : run_dir_(std::move(run_dir)) {}

  // Records a sighting of ckpt-<step> damaged or gone, for `why`. The first
  // one (or the first since its directory was written again) is tentative,
  // due for a second look (Tentative()); a second one confirms it, and so
  // does finding it gone on that look.
  void Add(int64_t step, Status why);
  bool Contains(int64_t step) const { return entries_.count(step) != 0; }
  // Why ckpt-<step> was skipped; Contains(step) must hold.
  const Status& Why(int64_t step) const { return entries_.at(step).why; }
  // Whether ckpt-<step> was skipped and its directory written since (or
  // removed, or made again): false when it was not skipped.
  bool WrittenAgain(int64_t step) const;
  // Seen damaged or gone on two looks at the same writing of it.
  bool Confirmed(int64_t step) const;
  // The steps seen damaged or gone once, due for their second look.
  std::vector<int64_t> Tentative() const;
  void Remove(int64_t step) { entries_.erase(step); }
  // Forgets the steps after `step`: a job started again from it writes them
  // anew.
  void RemoveAfter(int64_t step) { entries_.erase(entries_.upper_bound(step), entries_.end()); }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  using WriteTime = std::optional<std::filesystem::file_time_type>;
  struct Entry {
    Status why;
    WriteTime written;
    int sightings = 1;
  };
  // ckpt-<step>'s modification time; nullopt when it cannot be read (gone).
  WriteTime Written(int64_t step) const;

  std::string run_dir_;
  std::map<int64_t, Entry> entries_;
};

}  // namespace mirrored
