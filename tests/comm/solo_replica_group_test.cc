// SoloReplicaGroup: one replica in all, every collective the identity,
// counted, checked, and failing with Aborted once the group is aborted.
#include "worker/comm/solo_replica_group.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace mirrored {
namespace {

TEST(SoloReplicaGroupTest, CollectivesLeaveTheDataAsItIsAndCount) {
  auto started = std::make_shared<std::atomic<uint64_t>>(0);
  SoloReplicaGroup group(started);
  ASSERT_EQ(group.local_replicas(), 1);
  Communicator& comm = group.replica(0);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  const std::vector<float> want{1.5f, -2.f, 0.f, 7.25f};
  std::vector<float> data = want;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    ASSERT_TRUE(comm.AllReduce(data.data(), data.size(), op).ok());
    EXPECT_EQ(data, want);
  }
  ASSERT_TRUE(comm.AllReduceHost(data.data(), data.size(), ReduceOp::kSum).ok());
  ASSERT_TRUE(comm.Broadcast(data.data(), data.size(), 0).ok());
  ASSERT_TRUE(comm.BroadcastHost(data.data(), data.size(), 0).ok());
  ASSERT_TRUE(comm.Barrier().ok());
  ASSERT_TRUE(comm.AllReduce(nullptr, 0, ReduceOp::kSum).ok());
  EXPECT_EQ(data, want);
  EXPECT_EQ(started->load(), 8u);
}

TEST(SoloReplicaGroupTest, ArgumentsAreCheckedAsInALargerJob) {
  SoloReplicaGroup group;
  float x = 1.f;
  Status s = group.replica(0).Broadcast(&x, 1, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("root 1"), std::string::npos) << s;
  s = group.replica(0).AllReduce(nullptr, 3, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THROW(group.replica(1), std::out_of_range);
}

TEST(SoloReplicaGroupTest, AfterAbortEveryOperationFailsNamingItAndTheFirstReason) {
  SoloReplicaGroup group;
  Communicator& comm = group.replica(0);
  float x = 2.f;
  ASSERT_TRUE(comm.Barrier().ok());  // #1
  group.Abort(UnavailableError("the job was interrupted"));
  group.Abort(AbortedError("a later reason"));
  Status s = comm.AllReduce(&x, 1, ReduceOp::kAvg);  // #2
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("the job was interrupted"), std::string::npos) << s;
  EXPECT_NE(s.message().find("all-reduce (avg, 1 floats) #2"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("a later reason"), std::string::npos) << s;
  s = comm.Barrier();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("barrier #3"), std::string::npos) << s;
}

}  // namespace
}  // namespace mirrored
