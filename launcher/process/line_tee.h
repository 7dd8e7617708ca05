// Splits one task's raw output into lines: each goes to the console with the
// task's prefix and, unprefixed, to the task's log file; the last lines are
// kept for the failure report.
//
//   LineTee tee("[worker:1] ", &console, log_fd, /*keep_last=*/20);
//   tee.Append(bytes_read_from_pipe);   // any chunking
//   tee.Finish();                       // at EOF: flushes a last partial line
//
// Invariant: every byte appended reaches the log file in order; a line longer
// than kMaxLineBytes is cut into several console lines (so one noisy task
// cannot grow the launcher without bound), never dropped.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/process/console_writer.h"

namespace mirrored {

class LineTee {
 public:
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  // `console` may be null (log only); `log_fd` may be -1 (no log file). The
  // log fd stays owned by the caller.
  LineTee(std::string prefix, ConsoleWriter* console, int log_fd, size_t keep_last);

  void Append(std::string_view bytes);
  // Emits a trailing line that had no newline. Idempotent.
  void Finish();

  // The last `keep_last` complete lines, oldest first.
  std::vector<std::string> LastLines() const;
  size_t lines_seen() const { return lines_seen_; }

 private:
  void EmitLine(std::string_view line);
  // To the log file; a failure (disk full) is said once on the console, and
  // the file is then left alone.
  void WriteLog(std::string_view bytes);

  std::string prefix_;
  ConsoleWriter* console_;
  int log_fd_;
  bool log_failed_ = false;
  size_t keep_last_;
  std::string partial_;
  std::deque<std::string> last_;
  size_t lines_seen_ = 0;
};

}  // namespace mirrored
