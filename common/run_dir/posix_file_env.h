// FileEnv on POSIX system calls (open/write/fsync/rename/...), the one real
// implementation; FileEnv::Default() returns a process-wide instance.
//
//   PosixFileEnv env;
//   MIRRORED_RETURN_IF_ERROR(env.CreateDir("runs/x/checkpoints"));
//   MIRRORED_ASSIGN_OR_RETURN(std::string bytes, env.ReadFile("runs/x/checkpoints/checkpoint"));
#pragma once

#include "common/run_dir/file_env.h"

namespace mirrored {

class PosixFileEnv : public FileEnv {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Exchange(const std::string& a, const std::string& b) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  StatusOr<std::string> ReadFile(const std::string& path) override;
  StatusOr<std::string> ReadFilePrefix(const std::string& path, uint64_t max_bytes) override;
  StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  bool FileExists(const std::string& path) override;
};

// The Status for a failed system call: "<op> <path>: <strerror>", with the
// code derived from `err` (ENOENT -> NotFound, EEXIST -> AlreadyExists, ...).
Status PosixError(std::string_view op, const std::string& path, int err);

}  // namespace mirrored
