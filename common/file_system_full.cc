#include "common/file_system_full.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

namespace mirrored {

bool IsFileSystemFull(int err) { return err == ENOSPC || err == EDQUOT; }

std::string ByteSizeText(unsigned long long bytes) {
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  // Whole KiB; one decimal above (a disk's size, not its last byte).
  if (unit == 0) std::snprintf(text, sizeof(text), "%.0f %s", value, kUnits[unit]);
  else std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string FileSystemFullText(const std::string& path, int err) {
  namespace fs = std::filesystem;
  // The directory that holds the path (a file being written may be gone),
  // past temporary ones (".tmp-ckpt-10-<random>": removed by the time a
  // user reads this) to one the user knows.
  fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  while (!dir.empty() && dir != dir.parent_path() &&
         (!fs::is_directory(dir, ec) || dir.filename().string().rfind('.', 0) == 0)) {
    dir = dir.parent_path();
  }
  std::string space;
  struct statvfs vfs {};
  if (!dir.empty() && ::statvfs(dir.c_str(), &vfs) == 0) {
    const unsigned long long unit = vfs.f_frsize != 0 ? vfs.f_frsize : vfs.f_bsize;
    space = "; " + ByteSizeText(static_cast<unsigned long long>(vfs.f_bavail) * unit) + " free of " +
            ByteSizeText(static_cast<unsigned long long>(vfs.f_blocks) * unit);
  }
  const std::string where = dir.empty() ? path : dir.string();
  return std::string(err == EDQUOT ? "the disk quota for " : "the file system holding ") + where +
         (err == EDQUOT ? " is used up (" : " is full (") + std::strerror(err) + space +
         "): free space there, or use another --run-dir";
}

std::string WriteErrorText(const std::string& path, int err) {
  return IsFileSystemFull(err) ? FileSystemFullText(path, err) : std::strerror(err);
}

std::optional<std::string> FileSystemFullIn(const std::string& line) {
  static const std::regex kFull(
      R"((the file system holding \S+ is full|the disk quota for \S+ is used up) \([^)]*\))");
  std::smatch m;
  if (!std::regex_search(line, m, kFull)) return std::nullopt;
  return m[0].str();
}

}  // namespace mirrored
