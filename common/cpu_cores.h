// How many threads a process should compute with on the CPU.
//
//   const int budget = CpuThreadBudget();   // split among this process's CPU replicas
//
// torchrun and Horovod leave this to OMP_NUM_THREADS (torchrun sets it to 1
// for several processes); mirrored reads it the same way, and otherwise uses
// the CPUs the process may really run on, not the machine's count: a Slurm
// step, a `taskset` or a container's CPU limit gives fewer.
#pragma once

#include <optional>
#include <string>

namespace mirrored {

// The CPUs this process may run on: its affinity mask, capped by a cgroup
// CPU quota (cgroup v2 cpu.max of its cgroup or an ancestor's, or v1
// cpu.cfs_quota_us / cpu.cfs_period_us; rounded up). At least 1.
int UsableCpuCores();

// The machine's online CPUs, whatever this process may use of them.
int OnlineCpuCores();

// A thread count as OMP_NUM_THREADS gives one: "1" to "4096"; nullopt for
// anything else ("", "0", "4,2", "two").
std::optional<int> ParseThreadCount(const std::string& text);

// OMP_NUM_THREADS when ParseThreadCount takes it, else UsableCpuCores().
int CpuThreadBudget();

}  // namespace mirrored
