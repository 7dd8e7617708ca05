// Writes RUN_DIR/checkpoints/ckpt-<step>/ crash-safely (the chief only):
// everything goes into checkpoints/.tmp-ckpt-<step>-<random>/, every file
// and that directory are fsynced, the directory is renamed to ckpt-<step>
// and checkpoints/ fsynced; then the `checkpoint` index is replaced
// atomically and old checkpoints are pruned. A crash at any point leaves
// every earlier ckpt-* complete, and readers (CheckpointReader) validate
// what they open, so they never see a partial one.
//
// Pruning keeps the checkpoint just written plus the newest
// `keep_checkpoints - 1` others, never the one an evaluator reads, and, while
// an evaluator follows the job, the ones it has not evaluated yet among the
// newest 2 x `keep_checkpoints` (evaluator_lease.h). A pruned directory is first renamed to a ".tmp-"
// name, so no ckpt-* is ever half deleted; the index lists it as "pruned"
// (checkpoint_index.h). Stray ".tmp-*" entries (left by a
// crashed write) are removed by the first write of each CheckpointWriter.
//
// Asynchronous writes: WriteAsync() copies the tensors into an owned
// snapshot on the caller's thread (the only stall training sees) and a
// background thread does the file work. One write is in flight at a time:
// a second WriteAsync() (or Write()) first waits for the previous one (with
// `wait_timeout`), so at most one snapshot is held (its buffers are kept
// for the next snapshot: memory stays at one copy of the tensors, and the
// copy lands in pages already mapped). An error of a background
// write is returned by the next WriteAsync()/Write()/Wait() call, exactly
// once; such a WriteAsync() does not start its own write.
//
//   CheckpointWriter writer(FileEnv::Default(), run_dir, {.keep_checkpoints = 5});
//   MIRRORED_RETURN_IF_ERROR(writer.WriteAsync({state, model_tensors, optimizer_tensors}));
//   MIRRORED_RETURN_IF_ERROR(writer.Wait());   // before exiting
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/run_dir/checkpoint_state.h"
#include "common/run_dir/file_env.h"
#include "common/run_dir/safetensors_file.h"

namespace mirrored {

// What one checkpoint holds. The views are borrowed until Write() returns
// (WriteAsync(): until it returns, the snapshot is copied before that).
struct CheckpointContents {
  CheckpointState state;
  std::vector<TensorView> model;      // weights and non-trainable state (BatchNorm statistics)
  std::vector<TensorView> optimizer;  // slots (Adam m/v, momentum) and e.g. an I64 "step"
};

struct CheckpointWriterOptions {
  int keep_checkpoints = 5;  // K >= 1
  // This chief's start (training_start.h): an evaluator's progress recorded
  // under another start counts as evaluated only up to start_step.
  std::string start_run = "";
  int64_t start_step = 0;
  // How long a write waits for the previous asynchronous one to finish.
  std::chrono::milliseconds wait_timeout = std::chrono::minutes(10);
};

class CheckpointWriter {
 public:
  // `env` is not owned and must outlive the writer.
  CheckpointWriter(FileEnv* env, std::string run_dir, CheckpointWriterOptions options = {});
  // Waits (up to wait_timeout) for an asynchronous write; logs an error that
  // was never reported.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Writes on the calling thread, after the in-flight asynchronous write.
  // Errors: InvalidArgument (bad state or tensor), DeadlineExceeded (the
  // previous write did not finish in time), or the file error, naming the
  // checkpoint and the path; or the previous asynchronous write's error.
  Status Write(const CheckpointContents& contents);
  // Copies the contents and returns; the file work runs in the background.
  Status WriteAsync(const CheckpointContents& contents);
  // Waits for the in-flight write; returns its error if not yet reported.
  Status Wait();
  Status Wait(std::chrono::milliseconds timeout);
  // A background write's error not yet reported (then reported: OK after),
  // or OK; never waits. For a caller that checks between two writes, so a
  // failed write (a full disk) stops it before the next checkpoint's step.
  Status TakeFailure();

  const std::string& run_dir() const { return run_dir_; }

 private:
  struct Snapshot;

  // Waits until no write is in flight; takes the unreported error.
  Status WaitIdleLocked(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout);
  // unreported_, reset to OK (mu_ held).
  Status TakeUnreportedLocked();
  void BackgroundLoop();
  Status WriteNow(const CheckpointContents& contents);
  // The two files' bytes and state.json (with their digests) for WriteNow;
  // errors name `context` and the file.
  struct EncodedCheckpoint;
  static StatusOr<EncodedCheckpoint> Encode(const CheckpointContents& contents, const std::string& context);
  Status WriteFile(const std::string& path, const SafetensorsFile::Encoded& encoded);
  // Size and CRC-32C of what WriteFile writes (recorded in state.json).
  static CheckpointState::FileDigest Digest(const SafetensorsFile::Encoded& encoded);
  Status RemoveStrayTempEntries();
  Status UpdateIndexAndPrune(int64_t step);
  bool warned_evaluator_behind_ = false;  // UpdateIndexAndPrune warns once
  // The index's "pruned" list after this write: the last one written (read
  // from the index the first time, up to options_.start_step: a later one
  // was an earlier run's) plus `doomed`, less `kept` (ascending).
  std::vector<int64_t> PrunedList(int64_t step, const std::vector<int64_t>& kept,
                                  const std::vector<int64_t>& doomed);
  std::optional<std::vector<int64_t>> pruned_;  // as last written to the index
  std::set<int64_t> written_;                   // steps this writer wrote

  FileEnv* const env_;
  const std::string run_dir_;
  const CheckpointWriterOptions options_;
  bool cleaned_temp_entries_ = false;  // touched by whichever thread writes, one at a time

  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<Snapshot> pending_;  // queued for the background thread
  std::unique_ptr<Snapshot> spare_;    // the last written snapshot, its buffers reused
  bool busy_ = false;                  // a write runs (background or caller thread)
  std::optional<int64_t> busy_step_;
  Status unreported_;  // first error not yet returned to the caller
  bool shutdown_ = false;
  std::thread thread_;  // started by the first WriteAsync
};

}  // namespace mirrored
