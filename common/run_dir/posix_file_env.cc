#include "common/run_dir/posix_file_env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/file_system_full.h"
#include "common/logging.h"

namespace mirrored {
namespace {

// Out of file descriptors (a flood of connections to the chief's port
// takes them, probe D8): a checkpoint or log file waits for one to be
// freed, as gRPC drops connections that never finish their handshake,
// instead of failing the job at once.
constexpr auto kDescriptorWait = std::chrono::seconds(30);
constexpr auto kDescriptorRetry = std::chrono::milliseconds(50);

int OpenWaitingForDescriptor(const std::string& path, int flags, mode_t mode = 0) {
  const auto give_up = std::chrono::steady_clock::now() + kDescriptorWait;
  bool said = false;
  while (true) {
    const int fd = ::open(path.c_str(), flags, mode);
    if (fd >= 0 || (errno != EMFILE && errno != ENFILE) || std::chrono::steady_clock::now() >= give_up) return fd;
    if (!said) {
      MIRRORED_LOG(WARNING) << "out of file descriptors opening " << path << "; waiting up to "
                            << kDescriptorWait.count() << " s for one to be freed";
      said = true;
    }
    std::this_thread::sleep_for(kDescriptorRetry);
  }
}

}  // namespace

Status PosixError(std::string_view op, const std::string& path, int err) {
  // A full disk is said as such, with the space left (an Internal error:
  // exit 1, which the launcher may retry once space is freed).
  std::string message = std::string(op) + " " + path + ": " + WriteErrorText(path, err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(message));
    case EEXIST:
    case ENOTEMPTY:
      return AlreadyExistsError(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

namespace {

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return FailedPreconditionError("write " + path_ + ": file is closed");
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return OkStatus();
  }

  Status Sync() override {
    if (fd_ < 0) return FailedPreconditionError("fsync " + path_ + ": file is closed");
    if (::fsync(fd_) != 0) return PosixError("fsync", path_, errno);
    return OkStatus();
  }

  Status Close() override {
    if (fd_ < 0) return OkStatus();
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return PosixError("close", path_, errno);
    return OkStatus();
  }

 private:
  std::string path_;
  int fd_;
};

}  // namespace

FileEnv* FileEnv::Default() {
  static PosixFileEnv* env = new PosixFileEnv();
  return env;
}

StatusOr<std::unique_ptr<WritableFile>> PosixFileEnv::NewWritableFile(const std::string& path) {
  int fd = OpenWaitingForDescriptor(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError("create", path, errno);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
}

Status PosixFileEnv::CreateDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    int err = errno;
    if (err == EEXIST) {
      struct stat st;
      if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
        return FailedPreconditionError("mkdir " + path + ": exists and is not a directory");
      }
    }
    return PosixError("mkdir", path, err);
  }
  return OkStatus();
}

Status PosixFileEnv::SyncDir(const std::string& path) {
  int fd = OpenWaitingForDescriptor(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError("open directory", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return PosixError("fsync directory", path, err);
  return OkStatus();
}

Status PosixFileEnv::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    return PosixError("rename " + from + " to", to, errno);
  return OkStatus();
}

Status PosixFileEnv::Exchange(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    if (err == EINVAL || err == ENOSYS || err == EOPNOTSUPP) {
      return UnimplementedError("exchange " + a + " and " + b + ": " + std::strerror(err));
    }
    return PosixError("exchange " + a + " and", b, err);
  }
  return OkStatus();
}

Status PosixFileEnv::RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return PosixError("unlink", path, errno);
  return OkStatus();
}

Status PosixFileEnv::RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return PosixError("remove tree", path, ec.value());
  return OkStatus();
}

StatusOr<std::vector<std::string>> PosixFileEnv::ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return PosixError("list directory", path, errno);
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return PosixError("list directory", path, err);
  return names;
}

StatusOr<std::string> PosixFileEnv::ReadFile(const std::string& path) {
  return ReadFilePrefix(path, UINT64_MAX);
}

StatusOr<std::string> PosixFileEnv::ReadFilePrefix(const std::string& path, uint64_t max_bytes) {
  int fd = OpenWaitingForDescriptor(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PosixError("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return PosixError("stat", path, err);
  }
  std::string out;
  out.resize(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(st.st_size), max_bytes)));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return PosixError("read", path, err);
    }
    if (n == 0) break;  // shrank while reading: return what is there
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

StatusOr<uint64_t> PosixFileEnv::GetFileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
  return static_cast<uint64_t>(st.st_size);
}

bool PosixFileEnv::FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace mirrored
