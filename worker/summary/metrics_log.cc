#include "worker/summary/metrics_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "common/file_system_full.h"
#include "common/json_depth.h"
#include "common/logging.h"

namespace mirrored {
namespace {

std::string Errno(int err) { return std::strerror(err); }

int OpenForAppend(const std::string& path) {
  return ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

// How often a writer waiting for metrics.jsonl's lock tries again.
constexpr auto kLockRetry = std::chrono::milliseconds(10);

// An exclusive flock on `fd` within `wait` (polled: flock has no timed
// wait): 0, EWOULDBLOCK when not granted in time, or the errno (ENOLCK: a
// file system without locks).
int LockWithin(int fd, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return errno;
    if (std::chrono::steady_clock::now() >= deadline) return EWOULDBLOCK;
    std::this_thread::sleep_for(kLockRetry);
  }
  return 0;
}

std::string LockProblem(const std::string& path, int err) {
  return err == EWOULDBLOCK ? path + ": lock not granted within " + std::to_string(kMetricsLockWait.count() / 1000) +
                                  " s (another writer stopped or hung?)"
                            : path + ": cannot lock: " + Errno(err);
}

void Unlock(int fd) { (void)::flock(fd, LOCK_UN); }

// Writes all of `data` at `offset` (pwrite) or, with offset < 0, at the end
// (the fd is O_APPEND). 0 or the errno.
int WriteAll(int fd, const std::string& data, off_t offset = -1) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = offset < 0 ? ::write(fd, data.data() + done, data.size() - done)
                                 : ::pwrite(fd, data.data() + done, data.size() - done,
                                            offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// The whole file behind `fd`, or the errno.
int ReadAll(int fd, std::string* out) {
  out->clear();
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
    at += n;
  }
}

// Makes the file behind `fd` hold exactly `text`, durably. 0 or the errno.
int Replace(int fd, const std::string& text) {
  if (int err = WriteAll(fd, text, 0)) return err;
  if (::ftruncate(fd, static_cast<off_t>(text.size())) != 0 || ::fsync(fd) != 0) return errno;
  return 0;
}

// A line's "kind" and "step"; `object` false when it is not a JSON object
// (what is left of a line a crashed writer cut, once another writer ended it).
struct LineFields {
  bool object = false;
  std::string kind;
  std::optional<int64_t> step;
};

LineFields Fields(const std::string& line) {
  LineFields f;
  if (JsonNestingPastLimit(line)) return f;  // not a line mirrored wrote
  auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return f;
  f.object = true;
  if (auto kind = record.find("kind"); kind != record.end() && kind->is_string()) f.kind = kind->get<std::string>();
  if (auto s = record.find("step"); s != record.end() && s->is_number_integer()) f.step = s->get<int64_t>();
  return f;
}

// A rewrite cut short (the chief died in it): its result was saved first,
// in `copy`, after a line with the size the file had. Completed (into `fd`
// and `*text`) only if the file still has that size (nothing appended
// since: nothing to lose); else it is left as it is, and the caller drops
// its damaged lines. No `copy`: nothing to do.
Status CompleteCutShortRewrite(int fd, const std::string& path, const std::string& copy, std::string* text) {
  const int saved = ::open(copy.c_str(), O_RDONLY | O_CLOEXEC);
  if (saved < 0) return OkStatus();
  std::string result;
  const int err = ReadAll(saved, &result);
  ::close(saved);
  if (err != 0) return InternalError("cannot read " + copy + ": " + Errno(err));
  const size_t header_end = result.find('\n');
  auto header = nlohmann::json::parse(result.substr(0, header_end), nullptr, /*allow_exceptions=*/false);
  const bool intact = header_end != std::string::npos && header.is_object() &&
                      header.contains("metrics_rewrite_of_bytes") &&
                      header["metrics_rewrite_of_bytes"].is_number_unsigned() &&
                      header["metrics_rewrite_of_bytes"].get<uint64_t>() == text->size();
  if (intact) {
    result.erase(0, header_end + 1);
    if (int e = Replace(fd, result)) return InternalError("cannot rewrite " + path + ": " + WriteErrorText(path, e));
    MIRRORED_LOG(WARNING) << path << ": completed a rewrite cut short, from " << copy;
    *text = std::move(result);
  } else {
    MIRRORED_LOG(WARNING) << path << " changed since a rewrite was cut short: left as it is, less its damaged lines ("
                          << copy << " dropped)";
  }
  ::unlink(copy.c_str());
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& path) {
  const int fd = OpenForAppend(path);
  if (fd < 0) return InternalError("cannot open " + path + " for appending: " + Errno(errno));
  return std::unique_ptr<MetricsLog>(new MetricsLog(path, fd));
}

MetricsLog::~MetricsLog() { ::close(fd_); }

Status MetricsLog::ReopenIfReplaced() {
  struct stat ours {}, named {};
  const bool same = ::fstat(fd_, &ours) == 0 && ::stat(path_.c_str(), &named) == 0 && named.st_ino == ours.st_ino &&
                    named.st_dev == ours.st_dev;
  if (same) return OkStatus();
  const int fd = OpenForAppend(path_);
  if (fd < 0) return InternalError("cannot open " + path_ + " for appending: " + Errno(errno));
  ::close(fd_);
  fd_ = fd;
  return OkStatus();
}

Status MetricsLog::Append(nlohmann::json record) {
  if (!record.contains("time")) {
    record["time"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  std::string line = record.dump() + "\n";
  std::lock_guard<std::mutex> guard(mu_);
  MIRRORED_RETURN_IF_ERROR(ReopenIfReplaced());
  const int lock_err = LockWithin(fd_, kMetricsLockWait);
  const bool locked = lock_err == 0;
  if (!locked) {
    static std::once_flag once;
    std::call_once(once, [&] { MIRRORED_LOG(WARNING) << LockProblem(path_, lock_err) << ": appending without it"; });
  }
  // A writer that died mid-line (disk full, SIGKILL) left no newline: end
  // that line rather than glue this one onto it.
  struct stat st {};
  char last = '\n';
  if (::fstat(fd_, &st) == 0 && st.st_size > 0 && ::pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n') {
    line.insert(line.begin(), '\n');
  }
  const int err = WriteAll(fd_, line);
  if (locked) Unlock(fd_);
  if (err != 0) return InternalError("cannot append to " + path_ + ": " + WriteErrorText(path_, err));
  return OkStatus();
}

StatusOr<bool> MetricsLog::Has(const std::string& kind, int64_t step) {
  std::lock_guard<std::mutex> guard(mu_);
  std::string text;
  if (int err = ReadAll(fd_, &text)) return InternalError("cannot read " + path_ + ": " + Errno(err));
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const LineFields f = Fields(text.substr(begin, end - begin));
    if (f.kind == kind && f.step == step) return true;
    begin = end + 1;
  }
  return false;
}

StatusOr<MetricsLog::Removed> MetricsLog::SupersedeAfter(int64_t step) {
  std::lock_guard<std::mutex> guard(mu_);
  // Its own descriptor: pwrite on the O_APPEND one would append.
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("cannot open " + path_ + ": " + Errno(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }  // also releases the lock
  } closer{fd};
  if (int err = LockWithin(fd, kMetricsLockWait)) {
    MIRRORED_LOG(WARNING) << LockProblem(path_, err) << ": the lines of steps trained again stay in it";
    return Removed{};
  }
  const std::string copy = path_ + ".rewrite";
  std::string text;
  if (int err = ReadAll(fd, &text)) return InternalError("cannot read " + path_ + ": " + Errno(err));
  MIRRORED_RETURN_IF_ERROR(CompleteCutShortRewrite(fd, path_, copy, &text));

  std::string kept;
  kept.reserve(text.size());
  Removed removed;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // an incomplete last line
      ++removed.damaged;
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    const LineFields f = Fields(line);
    if (!f.object) {
      ++removed.damaged;
    } else if (f.step && *f.step > step) {
      ++removed.later;
    } else {
      kept.append(line).push_back('\n');
    }
    begin = end + 1;
  }
  if (removed.total() == 0) return removed;

  // The result first, complete and durable under its own name; then the
  // file itself, in place.
  const std::string tmp = copy + ".tmp";
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return InternalError("cannot create " + tmp + ": " + Errno(errno));
  const std::string header = nlohmann::json{{"metrics_rewrite_of_bytes", text.size()}}.dump() + "\n";
  int err = WriteAll(out, header + kept, 0);
  if (err == 0 && ::fsync(out) != 0) err = errno;
  ::close(out);
  if (err == 0 && ::rename(tmp.c_str(), copy.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return InternalError("cannot write " + copy + ": " + WriteErrorText(copy, err));
  }
  if (int e = Replace(fd, kept)) return InternalError("cannot rewrite " + path_ + ": " + WriteErrorText(path_, e));
  ::unlink(copy.c_str());
  return removed;
}

}  // namespace mirrored
