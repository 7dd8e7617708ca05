// The launcher's shared output: lines from every task, each written whole
// with one write(2) under a lock, so lines of different tasks never
// interleave mid-line.
//
//   ConsoleWriter console(STDOUT_FILENO);
//   console.WriteLine("[worker:1] ", "step 10 loss 0.52");
//   // -> "[worker:1] step 10 loss 0.52\n"
#pragma once

#include <mutex>
#include <string>
#include <string_view>

namespace mirrored {

class ConsoleWriter {
 public:
  explicit ConsoleWriter(int fd) : fd_(fd) {}

  // Writes prefix + line + '\n' as one record. `line` has no newline.
  void WriteLine(std::string_view prefix, std::string_view line);

  // From now on, the records whose prefix is `prefix` also go to `fd`
  // (-1: none), which the caller keeps open while this writer is used.
  void CopyLinesWithPrefix(std::string prefix, int fd);

 private:
  std::mutex mu_;
  int fd_;
  std::string copy_prefix_;
  int copy_fd_ = -1;
};

// Appends "==== mirrored-launch: <what> 2026-11-23 03:44:43 UTC ====" to a
// log file, marking where a run of it begins.
void WriteLogHeader(int fd, const std::string& what);

// Writes all of `data` to `fd`, retrying short writes and EINTR. Returns false
// on an error (e.g. EPIPE when the reader went away).
bool WriteAll(int fd, std::string_view data);

}  // namespace mirrored
