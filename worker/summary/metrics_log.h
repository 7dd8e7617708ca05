// RUN_DIR/metrics.jsonl: one JSON object per line (DESIGN.md, "Run
// directory"), appended and flushed line by line so a reader never sees half
// a line. Used by the chief (train, validation) and the evaluator (eval),
// which may append at the same time: every append holds an flock on the file.
//
//   auto log = MetricsLog::Open("runs/x/metrics.jsonl");
//   (*log)->Append({{"kind", "train"}, {"step", 100}, {"loss", 0.41}, ...});
//
// A job that resumes from the checkpoint at step S trains steps S+1... again:
// the train and validation lines an earlier run wrote for them describe
// weights that no longer exist. SupersedeAfter(S) drops them (as TensorBoard
// does with its events on a SessionLog START), so that a reader sees every
// step once; eval lines are kept (they evaluated checkpoints that existed).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace mirrored {

class MetricsLog {
 public:
  // Opens `path` for appending (creating it). Errors: Internal naming it.
  static StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& path);
  ~MetricsLog();

  // Adds "time" (Unix seconds) when the record has none. Thread-safe, and
  // safe against other processes appending (or superseding) at the same time.
  // A line left incomplete by a crashed writer is ended before this one.
  Status Append(nlohmann::json record);

  // Removes the "train" and "validation" lines whose step is greater than
  // `step`, and a last line left incomplete by a crash, by rewriting the file
  // (a temporary file renamed over it, so a crash keeps one whole version).
  // Returns how many lines were removed (0: the file is left as it was).
  StatusOr<int64_t> SupersedeAfter(int64_t step);

 private:
  MetricsLog(std::string path, std::FILE* f) : path_(std::move(path)), file_(f) {}
  // Locks file_ (LOCK_EX), reopening it first while path_ names another file
  // (another process superseded it). Returns the errno text on failure.
  Status LockCurrent();
  void Unlock();
  std::string path_;
  std::FILE* file_;
  std::mutex mu_;
};

}  // namespace mirrored
