#include "worker/checkpoint/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "worker/checkpoint/checkpoint_index.h"
#include "worker/checkpoint/file_env.h"

namespace mirrored {
namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", static_cast<double>(ms.count()) / 1000);
  return buf;
}

std::string HostName() {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  return host;
}

// This machine's boot: containers of one machine share it, two machines (or
// a pod rescheduled under the same host name on another node) do not.
std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "unknown" : id.substr(0, 8);
}

std::string Holder() {
  const std::string host = HostName() + " (boot " + BootId() + ")";
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return "pid " + std::to_string(getpid()) + " on host " + host + " since " + when;
}

}  // namespace

StatusOr<RunDirLock> RunDirLock::Acquire(const std::string& run_dir, std::chrono::milliseconds remote_wait) {
  const std::string dir = CheckpointsDir(run_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return InvalidArgumentError("--run-dir " + run_dir + ": cannot create " + dir + ": " +
                                (ec ? ec.message() : "not a directory"));
  }
  const std::string path = JoinPath(dir, kChiefLockFileName);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return InvalidArgumentError("--run-dir " + run_dir + ": cannot open " + path + ": " + std::strerror(errno));
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + remote_wait;
  bool said_waiting = false;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder(256, '\0');
    ssize_t n = pread(fd, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    if (err != EWOULDBLOCK) {
      close(fd);
      return InvalidArgumentError("--run-dir " + run_dir + ": cannot lock " + path + ": " + std::strerror(err));
    }
    // The same machine: the kernel would have dropped the lock of a holder
    // that died, so a live job holds it.
    const bool this_host = holder.find(" on host " + HostName() + " (boot " + BootId() + ") since ") != std::string::npos;
    // A holder on this machine is a live job, or one that is dying (its
    // launcher was just killed, and the kernel is ending its tasks): only
    // kDyingHolderWait for that.
    const auto now = std::chrono::steady_clock::now();
    if ((this_host && now >= start + kDyingHolderWait) || (!this_host && now >= deadline)) {
      close(fd);
      return InvalidArgumentError("--run-dir " + run_dir + " is in use by another job (its chief: " +
                                  (holder.empty() ? "unknown" : holder) + ")" +
                                  ", still after " + Seconds(this_host ? kDyingHolderWait : remote_wait) +
                                  ": give another --run-dir, or wait for that job to end");
    }
    if (this_host) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // flock has no timed wait
      continue;
    }
    if (!said_waiting) {
      MIRRORED_LOG(WARNING) << "--run-dir " << run_dir << " is locked by a chief on another host (" << holder
                            << "); waiting up to " << Seconds(remote_wait)
                            << " for it to end or, if that host died, for the file server to free its lock";
      said_waiting = true;
    }
    // flock has no timed wait: poll, within the deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const std::string me = Holder() + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno;
    close(fd);
    return InvalidArgumentError("--run-dir " + run_dir + ": cannot write " + path + ": " + std::strerror(err));
  }
  return RunDirLock(fd);
}

std::optional<std::string> RunDirLock::HeldOnThisMachine(const std::string& run_dir) {
  const auto deadline = std::chrono::steady_clock::now() + kDyingHolderWait;
  std::optional<std::string> holder;
  while ((holder = HolderOnThisMachineNow(run_dir)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a dying job's tasks end within this
  }
  return holder;
}

std::optional<std::string> RunDirLock::HolderOnThisMachineNow(const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kChiefLockFileName);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  // /proc/locks: "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF", the
  // file named by major:minor (hex) and inode.
  char id[64];
  std::snprintf(id, sizeof(id), " %02x:%02x:%llu ", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  bool held = false;
  for (std::string line; !held && std::getline(locks, line);) {
    held = line.find("FLOCK") != std::string::npos && (line + " ").find(id) != std::string::npos;
  }
  if (!held) return std::nullopt;
  std::ifstream in(path);
  std::string holder;
  std::getline(in, holder);
  return holder.empty() ? std::string("unknown") : holder;
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RunDirLock& RunDirLock::operator=(RunDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

}  // namespace mirrored
