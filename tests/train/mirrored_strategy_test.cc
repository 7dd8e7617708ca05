// MirroredStrategy as a user's own program meets it: its process-wide
// settings, and misuse of the replica functions that must fail at once with
// a message, not hang until the collective timeout or kill the process.
#include "worker/train/mirrored_strategy.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "common/cluster/tf_config_parser.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

StrategyOptions CpuReplicas(int n) {
  StrategyOptions o;
  o.device = DeviceKind::kCpu;
  o.cpu_replicas = n;
  o.collective_timeout = 60s;
  return o;
}

void OnSigpipe(int) {}

sighandler_t Disposition() {
  struct sigaction now {};
  sigaction(SIGPIPE, nullptr, &now);
  return now.sa_handler;
}

// A write to a dead peer's socket must fail with EPIPE (the peer's failure,
// exit 3), not kill the task with SIGPIPE (exit 141, no message); a
// program's own SIGPIPE handling is left alone.
TEST(MirroredStrategyTest, CreateIgnoresSigpipeUnlessTheProgramHandlesIt) {
  signal(SIGPIPE, SIG_DFL);
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(1));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_EQ(Disposition(), SIG_IGN);

  signal(SIGPIPE, OnSigpipe);
  strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(1));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_EQ(Disposition(), &OnSigpipe);
  signal(SIGPIPE, SIG_DFL);
}

// Replica 1 returns while replica 0 makes one more collective: Internal at
// once naming replica 1 (the timeout is a minute), and the strategy runs a
// next round of replica functions as usual.
TEST(MirroredStrategyTest, AnExtraCollectiveOnOneReplicaFailsAtOnce) {
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(2));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  Status s = (*strategy)->RunReplicas([](ReplicaContext& replica) -> Status {
    std::vector<float> v = {1.0f};
    MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(v));
    if (replica.local_replica() == 0) return replica.communicator().Barrier();
    return OkStatus();
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("local replica 1 returned from the replica function while replica 0 waits for it"),
            std::string::npos)
      << s;
}

TEST(MirroredStrategyTest, ReplicaFunctionsRunAgainAfterReturningTogether) {
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), CpuReplicas(3));
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  for (int round = 0; round < 3; ++round) {
    std::vector<float> sums(3);
    Status s = (*strategy)->RunReplicas([&](ReplicaContext& replica) -> Status {
      std::vector<float> v = {static_cast<float>(round + replica.local_replica())};
      MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(v));
      sums[static_cast<size_t>(replica.local_replica())] = v[0];
      return OkStatus();
    });
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s;
    for (float sum : sums) EXPECT_EQ(sum, static_cast<float>(3 * round + 3)) << "round " << round;
  }
}

}  // namespace
}  // namespace mirrored
