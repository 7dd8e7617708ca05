#include "launcher/process/line_tee.h"

#include <cerrno>
#include <cstring>

namespace mirrored {

LineTee::LineTee(std::string prefix, ConsoleWriter* console, int log_fd, size_t keep_last)
    : prefix_(std::move(prefix)), console_(console), log_fd_(log_fd), keep_last_(keep_last) {}

void LineTee::WriteLog(std::string_view bytes) {
  if (log_fd_ < 0 || log_failed_) return;
  if (WriteAll(log_fd_, bytes)) return;
  // Said once, on the console (the lines themselves still reach it).
  log_failed_ = true;
  const std::string why = std::strerror(errno);
  if (console_ != nullptr) {
    console_->WriteLine("[mirrored-launch] ", "cannot write the log file of " + prefix_.substr(1, prefix_.size() - 3) +
                                                  " (" + why + "): its lines from here on reach the console only");
  }
}

void LineTee::Append(std::string_view bytes) {
  WriteLog(bytes);
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      while (partial_.size() >= kMaxLineBytes) {
        EmitLine(std::string_view(partial_).substr(0, kMaxLineBytes));
        partial_.erase(0, kMaxLineBytes);
      }
      return;
    }
    if (partial_.empty()) {
      EmitLine(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      EmitLine(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineTee::Finish() {
  if (partial_.empty()) return;
  WriteLog("\n");
  EmitLine(partial_);
  partial_.clear();
}

void LineTee::EmitLine(std::string_view line) {
  // A carriage return left by a terminal-style progress bar would make the
  // console line overwrite its own prefix.
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (console_ != nullptr) console_->WriteLine(prefix_, line);
  ++lines_seen_;
  if (keep_last_ == 0) return;
  if (last_.size() == keep_last_) last_.pop_front();
  last_.emplace_back(line);
}

std::vector<std::string> LineTee::LastLines() const { return {last_.begin(), last_.end()}; }

}  // namespace mirrored
