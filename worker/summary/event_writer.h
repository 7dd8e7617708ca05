// Writes TensorBoard scalar summaries to an event file in a log directory
// (`tensorboard --logdir RUN_DIR/logs` shows them).
//
//   auto w = EventWriter::Create("runs/x/logs/train");   // events.out.tfevents.<time>.<host>
//   MIRRORED_RETURN_IF_ERROR((*w)->WriteScalar("loss", /*step=*/100, 0.42f));
//   MIRRORED_RETURN_IF_ERROR((*w)->Flush());
//
// The first record is the "brain.Event:2" file-version event, as
// TensorFlow's writer puts it. Not thread-safe: one writer per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "worker/summary/tfrecord_writer.h"

namespace mirrored {

class EventWriter {
 public:
  // Creates `log_dir` (and parents) and a new event file in it. Errors:
  // Internal naming the directory or file.
  static StatusOr<std::unique_ptr<EventWriter>> Create(const std::string& log_dir);

  Status WriteScalar(const std::string& tag, int64_t step, float value);
  // A SessionLog START at `step`: TensorBoard discards the scalars of steps
  // >= `step` read before it (from an earlier run's files), as it does for
  // TensorFlow's restarts. A resumed job writes it with its first new step.
  Status WriteSessionStart(int64_t step, const std::string& checkpoint_path);
  Status Flush() { return writer_->Flush(); }
  const std::string& path() const { return writer_->path(); }

 private:
  explicit EventWriter(std::unique_ptr<TfRecordWriter> writer) : writer_(std::move(writer)) {}
  std::unique_ptr<TfRecordWriter> writer_;
};

}  // namespace mirrored
