#include "launcher/process/process_group_cpu.h"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

namespace mirrored {
namespace {

// /proc/PID/stat after the command's ")" (which may itself hold spaces
// and parentheses): field 3 (state) onwards.
struct StatFields {
  pid_t pgrp = 0;
  int64_t cpu_ticks = 0;
};

std::optional<StatFields> ReadStat(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string state;
  int64_t ppid = 0, pgrp = 0, skip = 0, utime = 0, stime = 0, cutime = 0, cstime = 0;
  // 3 state, 4 ppid, 5 pgrp, 6 session, 7 tty, 8 tpgid, 9 flags, 10-13
  // faults, 14 utime, 15 stime, 16 cutime, 17 cstime.
  fields >> state >> ppid >> pgrp;
  for (int i = 6; i <= 13; ++i) fields >> skip;
  fields >> utime >> stime >> cutime >> cstime;
  if (!fields) return std::nullopt;
  return StatFields{.pgrp = static_cast<pid_t>(pgrp), .cpu_ticks = utime + stime + cutime + cstime};
}

}  // namespace

std::optional<int64_t> ProcessGroupCpuTicks(pid_t pgid, const std::string& proc_dir) {
  DIR* dir = opendir(proc_dir.c_str());
  if (dir == nullptr) return std::nullopt;
  std::optional<int64_t> total;
  while (dirent* d = readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(d->d_name[0]))) continue;
    std::optional<StatFields> stat = ReadStat(proc_dir + "/" + d->d_name + "/stat");
    if (!stat || stat->pgrp != pgid) continue;
    total = total.value_or(0) + stat->cpu_ticks;
  }
  closedir(dir);
  return total;
}

int64_t CpuTicksPerSecond() {
  static const int64_t ticks = [] {
    const long n = sysconf(_SC_CLK_TCK);
    return n > 0 ? static_cast<int64_t>(n) : int64_t{100};
  }();
  return ticks;
}

}  // namespace mirrored
