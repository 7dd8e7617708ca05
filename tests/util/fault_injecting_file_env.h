// A FileEnv for tests that fails, or "crashes" at, the Nth file operation,
// and afterwards drops what a power failure would lose (as leveldb's
// fault_injection_test does): file data not fsynced, and directory entries
// (creations, renames) whose directory was not fsynced since.
//
//   FaultInjectingFileEnv env(FileEnv::Default());
//   env.InjectFault(FaultInjectingFileEnv::Mode::kCrash, 7);   // op #7 and later fail
//   (void)writer.Write(contents); ASSERT_TRUE(env.DropUnsyncedState().ok());
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/run_dir/file_env.h"

namespace mirrored {

class FaultInjectingFileEnv : public FileEnv {
 public:
  enum class Mode {
    kNone,   // pass everything through (and count)
    kFail,   // operation N fails with Internal; later ones succeed
    kCrash,  // operation N and every later one fail without touching the disk
  };

  // `base` performs the real operations; not owned, must outlive this.
  explicit FaultInjectingFileEnv(FileEnv* base) : base_(base) {}

  // Operations are numbered from 0 in call order; every FileEnv and
  // WritableFile method counts as one (including reads and listings).
  void InjectFault(Mode mode, int64_t operation_index);
  int64_t operation_count() const;
  bool crashed() const;
  // One line per operation so far ("#3 append /r/ckpt-2/model.safetensors").
  std::vector<std::string> operation_log() const;

  // Undoes, on the base env, what a machine crash at this moment would
  // lose: truncates files written through this env to their last synced
  // size, then (newest first) removes created files and directories and
  // reverses renames and exchanges whose parent directories were not
  // SyncDir'ed afterwards (a file replaced by a rename gets its old content
  // back). Removals are
  // treated as immediately durable. Call it after the "crash", then read
  // the directory with the base env.
  Status DropUnsyncedState();

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

 private:
  class File;
  friend class File;

  struct FileState {
    uint64_t size = 0;
    uint64_t synced_size = 0;
  };
  // A directory-entry change not yet made durable by SyncDir.
  struct EntryChange {
    enum Kind { kCreateFile, kCreateDir, kRename, kExchange } kind;
    std::string path;  // created path, or rename destination (exchange: one side)
    std::string from;  // rename source (exchange: the other side)
    bool from_dir_synced = false;
    bool to_dir_synced = false;
    std::optional<std::string> replaced_content;  // file overwritten by the rename
  };

  // Counts one operation; returns the injected error if it is the one.
  Status Tick(const std::string& what);
  void RecordAppend(const std::string& path, uint64_t bytes);
  void RecordSync(const std::string& path);
  // Re-keys the tracked files under `from` to `to` (mu_ held).
  void MoveTrackedLocked(const std::string& from, const std::string& to,
                         std::map<std::string, FileState>* moved);

  FileEnv* base_;
  mutable std::mutex mu_;
  Mode mode_ = Mode::kNone;
  int64_t fault_index_ = -1;
  int64_t count_ = 0;
  bool crashed_ = false;
  std::vector<std::string> log_;
  std::map<std::string, FileState> files_;  // by current path
  std::vector<EntryChange> changes_;        // in order, only non-durable ones
};

}  // namespace mirrored
