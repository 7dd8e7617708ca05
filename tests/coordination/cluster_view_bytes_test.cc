// The cluster view on the wire: serialized once per view, parsed back to
// the same view by every agent; and its log line for a large job.
#include "worker/coordination/cluster_view_bytes.h"

#include <gtest/gtest.h>

#include "proto/coordination.pb.h"

namespace mirrored::coordination {
namespace {

ClusterView MakeView(int tasks) {
  std::vector<std::string> names;
  std::vector<int> counts;
  for (int i = 0; i < tasks; ++i) {
    names.push_back(i == 0 ? "chief:0" : "worker:" + std::to_string(i - 1));
    counts.push_back(i % 3 + 1);
  }
  return *BuildClusterView(names, counts, std::string(128, 'n'), 77);
}

TEST(ClusterViewBytesTest, ParsesBackToTheSameView) {
  const ClusterView view = MakeView(5);
  auto back = ParseClusterView(SerializeClusterView(view));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, view);
}

// RegisterResponse.view is bytes; a peer that sends it as the embedded
// ClusterView message (the field's earlier type) writes the same bytes.
TEST(ClusterViewBytesTest, BytesAreTheEmbeddedMessagesWireForm) {
  const ClusterView view = MakeView(3);
  rpc::RegisterResponse resp;
  resp.set_view(SerializeClusterView(view));
  resp.set_task_index(2);
  rpc::ClusterView embedded;
  ASSERT_TRUE(embedded.ParseFromString(resp.view()));
  EXPECT_EQ(embedded.tasks_size(), 3);
  EXPECT_EQ(embedded.tasks(2).rank_offset(), 3);
}

TEST(ClusterViewBytesTest, RefusesBytesThatAreNoView) {
  EXPECT_EQ(ParseClusterView("\xff\xff\xff").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseClusterView("").status().code(), StatusCode::kInvalidArgument);  // no tasks, no id
}

TEST(ClusterViewBytesTest, CacheSerializesEachViewOnce) {
  ClusterViewBytesCache cache;
  auto first = std::make_shared<const ClusterView>(MakeView(4));
  const auto a = cache.Get(first);
  EXPECT_EQ(cache.Get(first), a);  // the same bytes object, not a new serialization
  auto second = std::make_shared<const ClusterView>(MakeView(2));
  EXPECT_NE(*cache.Get(second), *a);
}

TEST(ClusterViewBytesTest, DebugStringOfALargeJobListsTheFirstTasks) {
  EXPECT_EQ(MakeView(2).DebugString(),
            "generation 77: 3 replicas; chief:0 x1 @0, worker:0 x2 @1 (device counts differ between tasks)");
  const std::string large = MakeView(1000).DebugString();
  EXPECT_NE(large.find("worker:62 x"), std::string::npos);
  EXPECT_EQ(large.find("worker:63 x"), std::string::npos);
  EXPECT_NE(large.find(", ... (936 more tasks)"), std::string::npos) << large;
}

}  // namespace
}  // namespace mirrored::coordination
