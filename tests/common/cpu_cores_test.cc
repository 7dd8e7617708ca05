#include "common/cpu_cores.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <thread>

namespace mirrored {
namespace {

// The affinity mask counts, not the machine's CPUs: a thread pinned to one
// CPU (as taskset or a Slurm step would pin it) has one.
TEST(CpuCoresTest, UsableCoresFollowTheAffinityMask) {
  const int all = UsableCpuCores();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    EXPECT_EQ(UsableCpuCores(), 1);
  });
  pinned.join();
}

TEST(CpuCoresTest, OmpNumThreadsSetsTheBudget) {
  const char* saved = getenv("OMP_NUM_THREADS");
  const std::string restore = saved ? saved : "";
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(CpuThreadBudget(), 3);
  for (const char* unusable : {"0", "-2", "two", "4,2", ""}) {
    setenv("OMP_NUM_THREADS", unusable, 1);
    EXPECT_EQ(CpuThreadBudget(), UsableCpuCores()) << unusable;
  }
  unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(CpuThreadBudget(), UsableCpuCores());
  if (saved) setenv("OMP_NUM_THREADS", restore.c_str(), 1);
}

}  // namespace
}  // namespace mirrored
