#include "common/cpu_cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace mirrored {
namespace {

// CPUs a quota of `quota` per `period` allows, rounded up; nullopt when
// unlimited or unreadable.
std::optional<int> QuotaCpus(double quota, double period) {
  if (!(quota > 0) || !(period > 0)) return std::nullopt;
  return std::max(1, static_cast<int>(std::ceil(quota / period)));
}

// cgroup v2: "max 100000" (none) or "200000 100000" (2 CPUs), in the
// process's cgroup or any ancestor.
std::optional<int> CgroupV2Cpus(const std::string& cgroup_path) {
  std::optional<int> least;
  std::string path = cgroup_path;
  while (true) {
    std::ifstream f("/sys/fs/cgroup" + path + (path == "/" ? "" : "/") + "cpu.max");
    std::string quota;
    double period = 0;
    if (f >> quota >> period && quota != "max") {
      if (std::optional<int> cpus = QuotaCpus(std::atof(quota.c_str()), period)) {
        least = least ? std::min(*least, *cpus) : *cpus;
      }
    }
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return least;
}

// cgroup v1: cpu.cfs_quota_us (-1: none) / cpu.cfs_period_us of the cpu
// controller's mount, as a container sees its own cgroup there.
std::optional<int> CgroupV1Cpus() {
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double quota = 0, period = 0;
  if (!(q >> quota) || !(p >> period)) return std::nullopt;
  return QuotaCpus(quota, period);
}

}  // namespace

int UsableCpuCores() {
  int cpus = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  std::optional<int> quota;
  std::ifstream cgroup("/proc/self/cgroup");
  for (std::string line; std::getline(cgroup, line);) {
    if (line.rfind("0::", 0) == 0) quota = CgroupV2Cpus(line.substr(3));
  }
  if (!quota) quota = CgroupV1Cpus();
  if (quota) cpus = std::min(cpus, *quota);
  return std::max(1, cpus);
}

int OnlineCpuCores() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::optional<int> ParseThreadCount(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int n = std::stoi(text);
  if (n < 1 || n > 4096) return std::nullopt;
  return n;
}

int CpuThreadBudget() {
  if (const char* v = std::getenv("OMP_NUM_THREADS")) {
    if (std::optional<int> n = ParseThreadCount(v)) return *n;
  }
  return UsableCpuCores();
}

}  // namespace mirrored
