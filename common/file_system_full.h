// The message for a write that failed because the file system is full
// (ENOSPC, or EDQUOT: the user's quota), written for the operator: which
// path, that the disk is full, and how much is free there now.
//
//   if (IsFileSystemFull(errno)) return InternalError("write " + path + ": " + FileSystemFullText(path, errno));
//   // "the file system holding /runs/x/checkpoints is full (No space left on device;
//   //  12 KiB free of 2.0 MiB): free space there, or use another --run-dir"
#pragma once

#include <optional>
#include <string>

namespace mirrored {

// ENOSPC or EDQUOT.
bool IsFileSystemFull(int err);

// What to say for `err` (IsFileSystemFull) met writing `path`: the
// directory holding it, the errno text, and the free and total space of
// that file system when statvfs(2) can tell (the nearest existing
// directory above the path whose name does not start with '.': not a
// temporary one, gone by the time a user reads it).
std::string FileSystemFullText(const std::string& path, int err);

// The text for a failed write of `path` with `err`: FileSystemFullText for
// a full disk, else strerror(err).
std::string WriteErrorText(const std::string& path, int err);

// The FileSystemFullText part of a line of a task's output ("the file
// system holding DIR is full (...)"), for the launcher's report; nullopt
// when the line has none.
std::optional<std::string> FileSystemFullIn(const std::string& line);

// "0 bytes", "12 KiB", "2.0 MiB", "3.4 GiB".
std::string ByteSizeText(unsigned long long bytes);

}  // namespace mirrored
