#include "common/run_dir/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"
#include "common/run_dir/file_env.h"
#include "common/seconds_text.h"

namespace mirrored {
namespace {

// A run directory that cannot be used: a configuration error (exit 2: a
// path that does not exist, cannot be written, is read-only), except for a
// full disk or an I/O error, which the same path may not have next time
// (exit 1, and a launcher may restart the job).
Status RunDirError(const std::string& message, int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case ENOMEM:
    case EINTR:
      return UnavailableError(message);
    default:
      return InvalidArgumentError(message);
  }
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

std::string ReadHolder(int fd) {
  std::string holder(256, '\0');
  const ssize_t n = pread(fd, holder.data(), holder.size(), 0);
  holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

bool OnThisMachine(const std::string& holder) {
  return holder.find(" on host " + HostName() + " (boot " + BootId() + ") since ") != std::string::npos;
}

// Whether the holder's process ("pid 123 on host ...", a pid of this
// machine) is ending: a zombie, or its exit under way (PF_EXITING), e.g.
// killed with its launcher and still tearing down (a GPU context takes a
// while). False when it cannot tell (gone, or another pid namespace).
bool HolderExiting(const std::string& holder) {
  if (holder.rfind("pid ", 0) != 0) return false;
  const long pid = std::strtol(holder.c_str() + 4, nullptr, 10);
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) return false;
  // After "(comm) ": state ppid pgrp session tty_nr tpgid flags ...
  std::istringstream fields(stat.substr(comm_end + 1));
  std::string state;
  long long skip = 0;
  unsigned long long flags = 0;
  fields >> state >> skip >> skip >> skip >> skip >> skip >> flags;
  constexpr unsigned long long kPfExiting = 0x4;
  return state == "Z" || state == "X" || (fields && (flags & kPfExiting) != 0);
}

// How long to give a holder on this machine: a live job holds the lock for
// good (kHolderGrace covers a job whose launcher was just killed and whose
// tasks have not started exiting yet); an exiting one is waited for.
std::chrono::milliseconds SameMachineWait(const std::string& holder) {
  return HolderExiting(holder) ? kExitingHolderWait : kHolderGrace;
}

// flock(2) has no timed wait: a lock in the way is tried again this often,
// within the deadline (a holder on another host is waited for longer).
constexpr std::chrono::milliseconds kLockRetry{20};
constexpr std::chrono::milliseconds kRemoteLockRetry{500};

// Opens (creating it and `dir`) the lock file `path` in `dir`.
StatusOr<int> OpenLockFile(const std::string& run_dir, const std::string& dir, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return RunDirError(
        "--run-dir " + run_dir + ": cannot create " + dir + ": " + (ec ? ec.message() : "not a directory"),
        ec ? ec.value() : ENOTDIR);
  }
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return RunDirError("--run-dir " + run_dir + ": cannot open " + path + ": " + std::strerror(err), err);
  }
  return fd;
}

// Replaces the lock file's line with this process's (Holder()).
Status WriteHolderLine(int fd, const std::string& run_dir, const std::string& path) {
  const std::string me = Holder() + "\n";
  errno = 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno != 0 ? errno : ENOSPC;  // a short write sets none
    return RunDirError("--run-dir " + run_dir + ": cannot write " + path + ": " + std::strerror(err), err);
  }
  return OkStatus();
}

// How a lock held by another job's chief or launcher is refused.
RunDirLock::Refusal kAnotherJob(const std::string& role) {
  return {"is in use by another job (its " + role + ": ", "give another --run-dir, or wait for that job to end"};
}

}  // namespace

StatusOr<RunDirLock> RunDirLock::Acquire(const std::string& run_dir, std::chrono::milliseconds remote_wait) {
  MIRRORED_ASSIGN_OR_RETURN(std::optional<RunDirLock> lock,
                            AcquireFile(run_dir, CheckpointsDir(run_dir), kChiefLockFileName, kAnotherJob("chief"), remote_wait,
                                        /*remote_is_refusal=*/true));
  return std::move(lock).value();
}

StatusOr<RunDirLock> RunDirLock::AcquireForEvaluator(const std::string& run_dir,
                                                     std::chrono::milliseconds remote_wait) {
  MIRRORED_ASSIGN_OR_RETURN(std::optional<RunDirLock> lock,
                            AcquireFile(run_dir, CheckpointsDir(run_dir), kEvaluatorLockFileName,
                                        {"already has an evaluator (", "one per run directory; stop that one first"},
                                        remote_wait, /*remote_is_refusal=*/true));
  return std::move(lock).value();
}

StatusOr<std::optional<RunDirLock>> RunDirLock::AcquireForLauncher(const std::string& run_dir) {
  // One file per machine: only this machine's launchers are sorted out here,
  // and a holder line is then never another machine's (a winner still
  // writing its line over an older one cannot be mistaken for a remote job).
  std::string host = HostName();
  for (char& c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  const std::string name = std::string(kLauncherLockFilePrefix) + host + ".lock";
  return AcquireFile(run_dir, JoinPath(run_dir, "logs"), name.c_str(), kAnotherJob("launcher"), std::chrono::milliseconds(0),
                     /*remote_is_refusal=*/false);
}

StatusOr<std::optional<RunDirLock>> RunDirLock::AcquireFile(const std::string& run_dir, const std::string& dir,
                                                            const char* name, const Refusal& refusal,
                                                            std::chrono::milliseconds remote_wait,
                                                            bool remote_is_refusal) {
  const std::string path = JoinPath(dir, name);
  MIRRORED_ASSIGN_OR_RETURN(const int fd, OpenLockFile(run_dir, dir, path));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Since when only shared locks have been in the way (one look after
  // another, or one that lasts): given kHolderGrace from then, not from
  // `start`, which a wait for a holder on another host may have used up.
  std::optional<Clock::time_point> looked_since;
  bool said_waiting = false;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      close(fd);
      return RunDirError("--run-dir " + run_dir + ": cannot lock " + path + ": " + std::strerror(err), err);
    }
    // Held shared only: someone looking (ChiefLockHeld, HolderOnThisMachineNow
    // take a shared lock and drop it at once), not a holder. The file's line
    // is then an earlier holder's, maybe one on another host long gone: not
    // to be waited for (or, with no remote wait, refused on). Tried again in
    // a moment, as a holder on this machine would be.
    const bool looked_at = flock(fd, LOCK_SH | LOCK_NB) == 0;
    if (looked_at) {
      flock(fd, LOCK_UN);
      if (!looked_since) looked_since = Clock::now();
      if (Clock::now() >= *looked_since + kHolderGrace) {
        close(fd);
        // No job: mirrored's looks last an instant. Some other process
        // (flock -s, a backup tool, a lock an NFS server kept) holds it.
        return InvalidArgumentError("--run-dir " + run_dir + " cannot be locked: a process holds a shared lock on " +
                                    path + ", still after " + SecondsText(kHolderGrace) +
                                    " (no mirrored job: its looks at the lock last an instant); find it with "
                                    "`fuser -v " + path + "` or `lslocks`, and end it or wait for it");
      }
      std::this_thread::sleep_for(kLockRetry);
      continue;
    }
    looked_since.reset();
    const std::string holder = ReadHolder(fd);
    // The same machine: the kernel drops the lock of a holder that died, so
    // a live job holds it, or one still ending.
    // No holder line yet: it was locked an instant ago and is being written
    // (taken as this machine's until it says otherwise).
    const bool this_host = holder.empty() || OnThisMachine(holder);
    if (!this_host && !remote_is_refusal) {
      close(fd);
      return std::optional<RunDirLock>();  // another machine's: not for this lock to judge
    }
    const std::chrono::milliseconds wait = this_host ? SameMachineWait(holder) : remote_wait;
    if (Clock::now() >= start + wait) {
      close(fd);
      return InvalidArgumentError("--run-dir " + run_dir + " " + refusal.what +
                                  (holder.empty() ? "unknown" : holder) + "), still after " + SecondsText(wait) + ": " +
                                  refusal.advice);
    }
    if (!this_host && !said_waiting) {
      MIRRORED_LOG(WARNING) << "--run-dir " << run_dir << " is locked by a chief on another host (" << holder
                            << "); waiting up to " << SecondsText(remote_wait)
                            << " for it to end or, if that host died, for the file server to free its lock";
      said_waiting = true;
    }
    std::this_thread::sleep_for(this_host ? kLockRetry : kRemoteLockRetry);
  }
  if (Status written = WriteHolderLine(fd, run_dir, path); !written.ok()) {
    close(fd);
    return written;
  }
  return std::optional<RunDirLock>(RunDirLock(fd));
}

std::optional<std::string> RunDirLock::HeldOnThisMachine(const std::string& run_dir) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::string> holder;
  while ((holder = HolderOnThisMachineNow(run_dir)) &&
         std::chrono::steady_clock::now() < start + SameMachineWait(*holder)) {
    std::this_thread::sleep_for(kLockRetry);
  }
  return holder;
}

bool RunDirLock::ChiefLockHeld(const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kChiefLockFileName);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = false;
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
  } else {
    held = errno == EWOULDBLOCK;
  }
  close(fd);
  return held;
}

std::optional<std::string> RunDirLock::HolderOnThisMachineNow(const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kChiefLockFileName);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // A shared lock, released at once: granted means nobody holds it. (It
  // cannot hurt a chief locking in the same instant: AcquireFile tells a
  // shared lock from a holder and tries again.)
  std::optional<std::string> holder;
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
  } else if (errno == EWOULDBLOCK) {
    // One on another host is the chief's to wait for; no line yet: just
    // locked, being written (looked at again by the caller's polling).
    const std::string text = ReadHolder(fd);
    if (text.empty()) holder = "a process that has just locked it";
    else if (OnThisMachine(text)) holder = text;
  }
  close(fd);
  return holder;
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
