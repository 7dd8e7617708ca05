#include "worker/data/idx_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/logging.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool IsGzipFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// "train-images-idx3-ubyte-<8 hex>-": the names of every cached version of
// the source at `path` start so (the hex is a hash of its canonical path).
std::string EntryPrefix(const std::string& path) {
  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  std::string base = fs::path(path).filename().string();
  if (base.size() > 3 && base.ends_with(".gz")) base.resize(base.size() - 3);
  char hash[9];
  std::snprintf(hash, sizeof(hash), "%08llx",
                static_cast<unsigned long long>(Fnv1a64(ec ? path : canonical.string()) >> 32));
  return base + "-" + hash + "-";
}

// EntryPrefix(path) + "<16 hex>.idx" for a source path and its stat: the hex
// covers the path, size, modification time and inode, so a changed source
// never matches an old entry.
std::string EntryName(const std::string& path, const struct stat& st) {
  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  const std::string key = (ec ? path : canonical.string()) + "|" + std::to_string(st.st_size) + "|" +
                          std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "|" +
                          std::to_string(st.st_ino) + "|" + std::to_string(st.st_dev);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(Fnv1a64(key)));
  return EntryPrefix(path) + hash + ".idx";
}

// Removes the entries (and lock files) of earlier versions of the same
// source, once `current` is published: one copy per source, not one per
// version it ever had. Best effort: a process still mapping an old entry
// keeps its pages (unlink does not take them away).
void PruneOlderVersions(const std::string& cache_dir, const std::string& prefix, const std::string& current) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix) || name == current || name == current + ".lock") continue;
    if (!name.ends_with(".idx") && !name.ends_with(".idx.lock")) continue;
    std::error_code rm;
    fs::remove(e.path(), rm);
  }
}

// The cached entry, if present and a valid IDX file.
StatusOr<IdxFile> MapEntry(const std::string& entry, const std::string& source, bool accept_float32) {
  MIRRORED_ASSIGN_OR_RETURN(auto region, ByteRegion::MapFile(entry));
  return IdxFile::Parse(source, std::move(region), accept_float32);
}

// Writes `bytes` to `entry` atomically (temporary file, then rename).
Status Publish(const std::string& entry, std::span<const uint8_t> bytes) {
  const std::string tmp = entry + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError(tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return UnavailableError(tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), entry.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return UnavailableError(entry + ": " + std::strerror(err));
  }
  return OkStatus();
}

// An exclusive flock on `path`, polled until `timeout` (a holder that dies
// releases it; one that hangs must not hang us). -1 when not granted.
int LockWithin(const std::string& path, std::chrono::milliseconds timeout, const std::string& source) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool said = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (!said) {
      MIRRORED_LOG(INFO) << "waiting up to " << timeout.count() / 1000 << " s for " << path
                         << ": another process holds it, inflating " << source;
      said = true;
    }
    if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return fd;
}

void WarnOnce(const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] { MIRRORED_LOG(WARNING) << message << " (dataset cache not used)"; });
}

}  // namespace

std::string IdxCacheDir() {
  if (const char* v = std::getenv("MIRRORED_DATA_CACHE")) {
    const std::string dir = v;
    return dir == "off" ? std::string() : dir;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/mirrored/datasets";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::string(h) + "/.cache/mirrored/datasets";
  }
  return std::string();
}

StatusOr<IdxFile> ReadIdxCached(const std::string& path, const IdxCacheOptions& options) {
  const std::string& cache_dir = options.dir;
  const auto lock_timeout = options.lock_timeout;
  struct stat st {};
  // Without a cache, or for a source that is missing or damaged
  // (IdxFile::Read names the problem), not gzipped (nothing to save), or
  // small once inflated, read the source. The inflated size decides: a
  // file that compresses well is the one worth inflating once per machine.
  if (cache_dir.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !IsGzipFile(path)) {
    return IdxFile::Read(path, options.accept_float32);
  }
  if (auto size = IdxFile::DecompressedSize(path, options.accept_float32);
      !size.ok() || *size < options.min_inflated_bytes) {
    return IdxFile::Read(path, options.accept_float32);
  }
  const std::string entry = cache_dir + "/" + EntryName(path, st);
  if (auto hit = MapEntry(entry, path, options.accept_float32); hit.ok()) return hit;

  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) {
    WarnOnce(cache_dir + ": cannot create (" + ec.message() + ")");
    return IdxFile::Read(path, options.accept_float32);
  }
  const int lock = LockWithin(entry + ".lock", lock_timeout, path);
  if (lock < 0) {
    WarnOnce(entry + ".lock: not granted within " + std::to_string(lock_timeout.count()) + " ms");
    return IdxFile::Read(path, options.accept_float32);
  }
  // Another process may have published it while we waited.
  StatusOr<IdxFile> result = MapEntry(entry, path, options.accept_float32);
  if (!result.ok()) {
    result = IdxFile::Read(path, options.accept_float32);
    if (result.ok()) {
      const auto region = result->region()->bytes();
      if (Status s = Publish(entry, region); !s.ok()) {
        WarnOnce(s.message());
      } else {
        PruneOlderVersions(cache_dir, EntryPrefix(path), fs::path(entry).filename().string());
        if (auto mapped = MapEntry(entry, path, options.accept_float32); mapped.ok()) {
          result = std::move(mapped);  // the shared copy, not this process's own
        }
      }
    }
  }
  ::close(lock);
  return result;
}

}  // namespace mirrored::data
