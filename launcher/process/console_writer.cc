#include "launcher/process/console_writer.h"

#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <string>
#include <utility>

namespace mirrored {

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void ConsoleWriter::WriteLine(std::string_view prefix, std::string_view line) {
  std::string record;
  record.reserve(prefix.size() + line.size() + 1);
  record.append(prefix);
  record.append(line);
  record.push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  WriteAll(fd_, record);
  if (copy_fd_ >= 0 && prefix == copy_prefix_) WriteAll(copy_fd_, record);
}

void ConsoleWriter::CopyLinesWithPrefix(std::string prefix, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  copy_prefix_ = std::move(prefix);
  copy_fd_ = fd;
}

void WriteLogHeader(int fd, const std::string& what) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
  (void)WriteAll(fd, "==== mirrored-launch: " + what + " " + when + " ====\n");
}

}  // namespace mirrored
