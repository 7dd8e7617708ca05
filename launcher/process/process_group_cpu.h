// The CPU time a task has used: every live process of its process group
// (the task is its group's leader), with the children they have reaped.
// Read from /proc; how --hang-timeout tells a task that waits for nothing
// from one that computes.
//
//   std::optional<int64_t> ticks = ProcessGroupCpuTicks(child.pid());
//   // ... later: (*later - *ticks) / CpuTicksPerSecond() seconds of CPU
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace mirrored {

// utime + stime + cutime + cstime, in clock ticks, summed over the
// processes of group `pgid` under `proc_dir`. nullopt when `proc_dir`
// cannot be read or no process of the group is there.
std::optional<int64_t> ProcessGroupCpuTicks(pid_t pgid, const std::string& proc_dir = "/proc");

// sysconf(_SC_CLK_TCK): the ticks of one CPU second.
int64_t CpuTicksPerSecond();

}  // namespace mirrored
