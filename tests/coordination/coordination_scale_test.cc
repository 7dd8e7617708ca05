// The coordination service at scale: thousands of simulated tasks
// (SimulatedJob: in process, no gRPC, no thread per task) form a job, pass
// a barrier, leave through the exit barrier, and all learn of one task's
// failure within the heartbeat bound. Timings at 1,024-16,384 tasks are in
// bench/coordination/service_bench (bench/RESULTS.md).
#include <gtest/gtest.h>

#include <chrono>

#include "worker/coordination/simulated_job.h"

namespace mirrored::coordination {
namespace {

constexpr int kLargeJob = 16384;
constexpr int kFailureJob = 4096;
// Short for CI; the bench runs the default 5 s.
constexpr std::chrono::milliseconds kHeartbeatTimeout{1000};
constexpr std::chrono::milliseconds kHeartbeatInterval{200};
constexpr std::chrono::milliseconds kCheckInterval{100};
// What the bound allows beyond detection on a loaded 2-core machine: the
// deadline thread's wake-up and the fan-out to every task, and one stall of
// the service's deadline thread past check interval + timeout / 2, after
// which the service counts every heartbeat afresh (CheckDeadlinesAfter):
// detection then comes up to one heartbeat timeout later, by design.
constexpr std::chrono::milliseconds kSchedulingAllowance = kHeartbeatTimeout + std::chrono::milliseconds(1000);
// How long the test waits for the answers at all.
constexpr std::chrono::milliseconds kAnswerWait{30000};

TEST(CoordinationScaleTest, SixteenThousandTasksFormAJobPassABarrierAndExit) {
  auto job = SimulatedJob::Create({.tasks = kLargeJob});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->Form().ok());
  ASSERT_TRUE((*job)->OpenErrorPolls().ok());
  ASSERT_TRUE((*job)->HeartbeatRound().ok());
  ASSERT_TRUE((*job)->PassBarrier("step/1").ok());
  ASSERT_TRUE((*job)->PassBarrier("step/1").ok()) << "a passed barrier's name is free again";
  ASSERT_TRUE((*job)->ShutdownAll().ok());
  const SimulatedJobTimes& t = (*job)->times();
  std::printf("%d tasks: register %.1f ms, last registration %.1f ms (answers %.1f ms), barrier %.1f ms, "
              "heartbeat round %.1f ms, exit barrier %.1f ms\n",
              kLargeJob, t.register_ms, t.last_registration_ms, t.answers_ms, t.barrier_ms, t.heartbeat_round_ms,
              t.exit_barrier_ms);
}

TEST(CoordinationScaleTest, ReportedErrorReachesSixteenThousandTasksAtOnce) {
  auto job = SimulatedJob::Create({.tasks = kLargeJob});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->Form().ok());
  ASSERT_TRUE((*job)->OpenErrorPolls().ok());
  const std::string failed = (*job)->task_name(kLargeJob / 2);
  ASSERT_TRUE((*job)->service().ReportError(failed, kLargeJob / 2 + 1, InternalError("loss is NaN")).ok());
  // ReportError answers every poll before it returns: no wait needed.
  auto last = (*job)->WaitForErrorEverywhere(failed, std::chrono::milliseconds(0));
  EXPECT_TRUE(last.ok()) << last.status();
}

TEST(CoordinationScaleTest, FrozenTaskReachesEveryTaskWithinTheHeartbeatBound) {
  auto job = SimulatedJob::Create({.tasks = kFailureJob,
                                   .heartbeat_timeout = kHeartbeatTimeout,
                                   .heartbeat_interval = kHeartbeatInterval,
                                   .check_interval = kCheckInterval});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->Form().ok());
  ASSERT_TRUE((*job)->OpenErrorPolls().ok());
  const int frozen = kFailureJob - 1;
  // Taken before the round: the frozen task's last heartbeat is no earlier.
  const auto last_heartbeat = SimulatedJob::Clock::now();
  ASSERT_TRUE((*job)->HeartbeatRound().ok());
  (*job)->StartHeartbeats(frozen);
  auto told = (*job)->WaitForErrorEverywhere((*job)->task_name(frozen), kAnswerWait);
  ASSERT_TRUE(told.ok()) << told.status();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(*told - last_heartbeat);
  std::printf("%d tasks: the frozen task's failure reached every task %lld ms after its last heartbeat\n",
              kFailureJob, static_cast<long long>(took.count()));
  EXPECT_GE(took, kHeartbeatTimeout);
  EXPECT_LE(took, kHeartbeatTimeout + kCheckInterval + kSchedulingAllowance);
}

}  // namespace
}  // namespace mirrored::coordination
