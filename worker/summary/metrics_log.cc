#include "worker/summary/metrics_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mirrored {
namespace {

std::string Errno() { return std::strerror(errno); }

int FlockRetrying(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// Whether the train/validation `line` logs a step after `step`.
bool LogsStepAfter(const std::string& line, int64_t step) {
  auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return false;
  auto kind = record.find("kind");
  auto s = record.find("step");
  if (kind == record.end() || s == record.end() || !kind->is_string() || !s->is_number_integer()) return false;
  const std::string k = kind->get<std::string>();
  return (k == "train" || k == "validation") && s->get<int64_t>() > step;
}

}  // namespace

StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "a+e");
  if (f == nullptr) return InternalError("cannot open " + path + " for appending: " + Errno());
  return std::unique_ptr<MetricsLog>(new MetricsLog(path, f));
}

MetricsLog::~MetricsLog() { std::fclose(file_); }

Status MetricsLog::LockCurrent() {
  for (;;) {
    if (FlockRetrying(fileno(file_), LOCK_EX) != 0) return InternalError("cannot lock " + path_ + ": " + Errno());
    struct stat ours {}, named {};
    if (::fstat(fileno(file_), &ours) != 0) {
      Unlock();
      return InternalError("cannot stat " + path_ + ": " + Errno());
    }
    if (::stat(path_.c_str(), &named) == 0 && named.st_ino == ours.st_ino && named.st_dev == ours.st_dev) {
      return OkStatus();
    }
    // Renamed over (or removed) since we opened it: append to the file the
    // path names now, as every other writer does.
    Unlock();
    std::FILE* f = std::fopen(path_.c_str(), "a+e");
    if (f == nullptr) return InternalError("cannot open " + path_ + " for appending: " + Errno());
    std::fclose(file_);
    file_ = f;
  }
}

void MetricsLog::Unlock() { FlockRetrying(fileno(file_), LOCK_UN); }

Status MetricsLog::Append(nlohmann::json record) {
  if (!record.contains("time")) {
    record["time"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  std::string line = record.dump() + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  MIRRORED_RETURN_IF_ERROR(LockCurrent());
  // A writer that died mid-line (disk full, SIGKILL) left no newline: end
  // that line rather than glue this one onto it.
  struct stat st {};
  char last = '\n';
  if (::fstat(fileno(file_), &st) == 0 && st.st_size > 0 &&
      ::pread(fileno(file_), &last, 1, st.st_size - 1) == 1 && last != '\n') {
    line.insert(line.begin(), '\n');
  }
  Status result = OkStatus();
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    result = InternalError("cannot append to " + path_ + ": " + Errno());
    std::clearerr(file_);
  }
  Unlock();
  return result;
}

StatusOr<int64_t> MetricsLog::SupersedeAfter(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  MIRRORED_RETURN_IF_ERROR(LockCurrent());
  auto unlock_and = [&](Status s) -> Status {
    Unlock();
    return s;
  };
  std::ifstream in(path_, std::ios::binary);
  if (!in) return unlock_and(InternalError("cannot read " + path_ + ": " + Errno()));
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  std::string kept;
  kept.reserve(text.size());
  int64_t removed = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // incomplete last line
      ++removed;
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    if (LogsStepAfter(line, step)) {
      ++removed;
    } else {
      kept.append(line).push_back('\n');
    }
    begin = end + 1;
  }
  if (removed == 0) {
    Unlock();
    return int64_t{0};
  }

  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return unlock_and(InternalError("cannot create " + tmp + ": " + Errno()));
  size_t done = 0;
  bool ok = true;
  while (ok && done < kept.size()) {
    ssize_t n = ::write(fd, kept.data() + done, kept.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const std::string error = ok ? std::string() : Errno();
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string why = ok ? Errno() : error;
    ::unlink(tmp.c_str());
    return unlock_and(InternalError("cannot rewrite " + path_ + ": " + why));
  }
  // Writers waiting on the old file's lock find it renamed over and reopen.
  Unlock();
  std::FILE* f = std::fopen(path_.c_str(), "a+e");
  if (f == nullptr) return InternalError("cannot open " + path_ + " for appending: " + Errno());
  std::fclose(file_);
  file_ = f;
  return removed;
}

}  // namespace mirrored
