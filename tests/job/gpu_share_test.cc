// The GPUs of a host split among the training tasks a cluster lists there
// (mirrored-launch cluster), in rank order, leftovers idle; nothing set for
// a lone task, an evaluator, a CPU host or a CUDA_VISIBLE_DEVICES already
// chosen (by the user, or by Slurm's GPU binding).
#include "launcher/job/gpu_share.h"

#include <gtest/gtest.h>

#include "common/cluster/tf_config_parser.h"

namespace mirrored {
namespace {

ClusterConfig Config(const std::string& task_type, int index) {
  // chief:0 and worker:1 on host a, worker:0 and worker:2 on host b.
  auto c = ParseTfConfig(R"({"cluster":{"chief":["a:1"],"worker":["b:1","a:2","b:2"],"evaluator":["a:3"]},)"
                         R"("task":{"type":")" +
                         task_type + R"(","index":)" + std::to_string(index) + "}}");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ClusterConfig{};
}

const std::vector<std::string> kEight = {"0", "1", "2", "3", "4", "5", "6", "7"};

TEST(GpuShareTest, TasksOfOneHostSplitItsGpusInRankOrder) {
  auto chief = GpuShareOf(Config("chief", 0), {}, kEight);
  ASSERT_TRUE(chief.has_value());
  EXPECT_EQ(chief->tasks_here, 2);
  EXPECT_EQ(chief->index_here, 0);
  EXPECT_EQ(chief->cuda_visible_devices, "0,1,2,3");
  auto worker1 = GpuShareOf(Config("worker", 1), {}, kEight);
  ASSERT_TRUE(worker1.has_value());
  EXPECT_EQ(worker1->index_here, 1);
  EXPECT_EQ(worker1->cuda_visible_devices, "4,5,6,7");
  EXPECT_EQ(worker1->gpus, (std::vector<std::string>{"4", "5", "6", "7"}));
  // Host b: worker:0 first, worker:2 second; 3 GPUs: one each, one idle.
  EXPECT_EQ(GpuShareOf(Config("worker", 0), {}, {"0", "1", "2"})->cuda_visible_devices, "0");
  EXPECT_EQ(GpuShareOf(Config("worker", 2), {}, {"0", "1", "2"})->cuda_visible_devices, "1");
}

TEST(GpuShareTest, MoreTasksThanGpusLeavesATaskOnCpus) {
  auto share = GpuShareOf(Config("worker", 1), {}, {"0"});
  ASSERT_TRUE(share.has_value());
  EXPECT_TRUE(share->gpus.empty());
  EXPECT_EQ(share->cuda_visible_devices, "");
}

TEST(GpuShareTest, NothingToSetWhenTheChoiceIsMadeOrThereIsNoneToMake) {
  EXPECT_FALSE(GpuShareOf(Config("chief", 0), {{"CUDA_VISIBLE_DEVICES", "3"}}, kEight).has_value());
  EXPECT_FALSE(GpuShareOf(Config("chief", 0), {{"CUDA_VISIBLE_DEVICES", ""}}, kEight).has_value());
  EXPECT_FALSE(GpuShareOf(Config("chief", 0), {}, {}).has_value());  // a CPU host
  EXPECT_FALSE(GpuShareOf(Config("evaluator", 0), {}, kEight).has_value());
  auto alone = ParseTfConfig(R"({"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":0}})");
  ASSERT_TRUE(alone.ok());
  EXPECT_FALSE(GpuShareOf(*alone, {}, kEight).has_value());  // the only training task at a
  auto local = ParseTfConfig("");
  ASSERT_TRUE(local.ok());
  EXPECT_FALSE(GpuShareOf(*local, {}, kEight).has_value());
}

}  // namespace
}  // namespace mirrored
