// ResolveCluster: each source a command line can name, from an environment
// map, and the warning when another source overrides a TF_CONFIG there.
#include "common/cluster/cluster_source.h"

#include <gtest/gtest.h>

#include <string>

namespace mirrored {
namespace {

constexpr char kTwoWorkers[] = R"({"cluster":{"worker":["h1:2222","h2:2222"]},"task":{"type":"worker","index":1}})";

EnvironmentMap SrunStep() {
  return {{"SLURM_PROCID", "1"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}};
}

TEST(ClusterSourceTest, TfConfigFromTheEnvironmentByDefault) {
  StatusOr<ClusterConfig> config = ResolveCluster({}, {{"TF_CONFIG", kTwoWorkers}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task.ToString(), "worker:1");
  EXPECT_TRUE(config->warnings.empty());
}

TEST(ClusterSourceTest, NothingIsASingleLocalTask) {
  StatusOr<ClusterConfig> config = ResolveCluster({}, {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->is_single_local_task);
}

TEST(ClusterSourceTest, SlurmWithItsPortBase) {
  StatusOr<ClusterConfig> config = ResolveCluster({.from_slurm = true, .slurm_port_base = 9000}, SrunStep());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task.ToString(), "worker:1");
  EXPECT_EQ(config->cluster.AddressOf(config->task)->ToString(), "n2:9000");
  EXPECT_TRUE(config->warnings.empty());
}

TEST(ClusterSourceTest, AnOverriddenTfConfigIsAWarningNamingTheFlag) {
  EnvironmentMap env = SrunStep();
  env["TF_CONFIG"] = kTwoWorkers;
  StatusOr<ClusterConfig> config = ResolveCluster({.from_slurm = true}, env);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_EQ(config->warnings[0], "the TF_CONFIG environment variable is ignored: the cluster comes from --from-slurm");

  config = ResolveCluster({.tf_config = R"({"cluster":{"worker":["h3:1"]},"task":{"type":"worker","index":0}})"},
                          {{"TF_CONFIG", kTwoWorkers}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.AddressOf(config->task)->ToString(), "h3:1");
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_NE(config->warnings[0].find("comes from --tf-config"), std::string::npos);

  // A blank TF_CONFIG is none: nothing to warn about.
  env["TF_CONFIG"] = " \n";
  config = ResolveCluster({.from_slurm = true}, env);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->warnings.empty());
}

TEST(ClusterSourceTest, ASourcesErrorIsReturnedAsItIs) {
  StatusOr<ClusterConfig> config = ResolveCluster({.from_k8s_indexed_job = true}, {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mirrored
