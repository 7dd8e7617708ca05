// The file operations the checkpoint code performs, behind one interface (the
// `Env` seam of leveldb) so tests can fail or "crash" any single operation
// (FaultInjectingFileEnv) and check what a reader finds afterwards.
//
//   FileEnv* env = FileEnv::Default();                       // POSIX
//   MIRRORED_ASSIGN_OR_RETURN(auto f, env->NewWritableFile(dir + "/x"));
//   MIRRORED_RETURN_IF_ERROR(f->Append(bytes)); MIRRORED_RETURN_IF_ERROR(f->Sync());
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mirrored {

// A file open for writing. Data is durable only after Sync() returns OK; the
// file's name is durable only after SyncDir() of its parent directory.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  virtual Status Sync() = 0;   // fsync(2): data and size reach the disk
  virtual Status Close() = 0;  // idempotent; the destructor closes silently
};

// Every method names the path (and the errno text) in its error message.
// Error codes: NotFound (no such file or directory), AlreadyExists,
// PermissionDenied, Internal (any other I/O error, e.g. a full disk).
class FileEnv {
 public:
  virtual ~FileEnv() = default;

  // The process-wide POSIX implementation; never deleted.
  static FileEnv* Default();

  // Creates or truncates `path`.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Fails with AlreadyExists when `path` exists.
  virtual Status CreateDir(const std::string& path) = 0;
  // fsync(2) of a directory: makes creations and renames inside it durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // rename(2): atomic; replaces a file `to`, or an empty directory `to`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Atomically swaps two existing paths (renameat2 RENAME_EXCHANGE), e.g. a
  // new directory with the old one of the same name. Unimplemented where the
  // file system cannot (callers then fall back to two renames).
  virtual Status Exchange(const std::string& a, const std::string& b) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes `path` and everything under it; OK when it does not exist.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Entry names in `path` (no "." or ".."), unordered.
  virtual StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // At most the first `max_bytes` bytes of `path`.
  virtual StatusOr<std::string> ReadFilePrefix(const std::string& path, uint64_t max_bytes) = 0;
  virtual StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
};

// "a/b" from ("a", "b"); `dir` may end with '/'.
std::string JoinPath(std::string_view dir, std::string_view name);

// Creates `path` unless it exists (as a directory).
Status CreateDirIfMissing(FileEnv* env, const std::string& path);

// Replaces `path` with `content` atomically and durably: writes
// "<dir>/<temp_prefix><random>", fsyncs it, renames it over `path`, fsyncs
// `dir`. A crash at any point leaves either the old or the new content at
// `path` (and possibly a stray temp file, which the caller may remove).
Status WriteFileAtomically(FileEnv* env, const std::string& dir, const std::string& name,
                           std::string_view content, const std::string& temp_prefix);

// Puts directory `temp` (complete and fsynced, in `dir`) at `dir`/`name`:
// renamed there, or, when `name` exists, swapped with it atomically
// (Exchange), since rename(2) cannot replace a non-empty directory. Where
// the file system cannot exchange (e.g. NFS), the old `name` is first
// renamed aside to "<dir>/<aside_prefix><random>": a reader then briefly
// finds none, never a mix. Fsyncs `dir`. Returns where the replaced version
// lies now (empty: there was none), for the caller to remove. After an
// error `temp` may still exist (holding the new or, once swapped, the old
// version); the caller removes it.
StatusOr<std::string> PublishDirectory(FileEnv* env, const std::string& dir, const std::string& temp,
                                       const std::string& name, const std::string& aside_prefix);

// 16 hex digits from a process-wide random generator, for temporary names.
std::string RandomHexSuffix();

}  // namespace mirrored
