// Table-driven Slurm resolution: srun-like variable sets in, the cluster and
// this task out, or the exact message naming the variable and its value.
#include "common/cluster/slurm_resolver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mirrored {
namespace {

struct SlurmCase {
  const char* name;
  EnvironmentMap env;
  int port_base;
  std::vector<std::string> workers;  // addresses in rank order; empty when invalid
  const char* task;
  const char* error;
};

// Short parameter names in test listings (ctest -N) instead of a byte dump.
void PrintTo(const SlurmCase& c, std::ostream* os) { *os << c.name; }

class SlurmResolverTest : public ::testing::TestWithParam<SlurmCase> {};

TEST_P(SlurmResolverTest, Resolves) {
  const SlurmCase& c = GetParam();
  StatusOr<ClusterConfig> config = ResolveSlurmCluster(c.env, c.port_base);
  if (c.error != nullptr) {
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(config.status().message(), c.error);
    return;
  }
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<std::string> workers;
  for (const TaskId& t : config->cluster.TrainingTasks()) {
    EXPECT_EQ(t.type, "worker");
    workers.push_back(config->cluster.AddressOf(t)->ToString());
  }
  EXPECT_EQ(workers, c.workers);
  EXPECT_EQ(config->task.ToString(), c.task);
  EXPECT_EQ(config->cluster.ChiefTask().ToString(), "worker:0");
  EXPECT_FALSE(config->is_single_local_task);
  // Outside an srun step (the job's variables only): said, not refused.
  const bool step = c.env.count("SLURM_STEP_NODELIST") > 0;
  EXPECT_EQ(config->warnings.size(), step ? 0u : 1u);
  if (!step) {
    EXPECT_NE(config->warnings[0].find("not a task started by srun"), std::string::npos);
  }
}

EnvironmentMap Step(const char* procid, const char* ntasks, const char* nodelist,
                    const char* per_node, const char* localid) {
  EnvironmentMap env{{"SLURM_PROCID", procid},
                     {"SLURM_STEP_NUM_TASKS", ntasks},
                     {"SLURM_STEP_NODELIST", nodelist},
                     {"SLURM_STEP_TASKS_PER_NODE", per_node}};
  if (localid != nullptr) env["SLURM_LOCALID"] = localid;
  return env;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SlurmResolverTest,
    ::testing::Values(
        SlurmCase{"TwoNodesTwoTasksEach", Step("3", "4", "node[01-02]", "2(x2)", "1"), 8888,
                  {"node01:8888", "node01:8889", "node02:8888", "node02:8889"}, "worker:3", nullptr},
        SlurmCase{"UnevenNodes", Step("4", "8", "node[01-03,07]", "3(x2),1,1", "1"), 8888,
                  {"node01:8888", "node01:8889", "node01:8890", "node02:8888", "node02:8889",
                   "node02:8890", "node03:8888", "node07:8888"},
                  "worker:4", nullptr},
        SlurmCase{"NodeOrderNotSorted", Step("1", "2", "node[9-10]", "1(x2)", "0"), 8888,
                  {"node9:8888", "node10:8888"}, "worker:1", nullptr},
        SlurmCase{"CustomPortBase", Step("0", "2", "gpu-a[1-2]", "1(x2)", "0"), 20000,
                  {"gpu-a1:20000", "gpu-a2:20000"}, "worker:0", nullptr},
        SlurmCase{"JobVariablesFallback",
                  EnvironmentMap{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                                 {"SLURM_JOB_NODELIST", "c1"}, {"SLURM_TASKS_PER_NODE", "2"}},
                  8888, {"c1:8888", "c1:8889"}, "worker:1", nullptr},
        SlurmCase{"NoProcid", EnvironmentMap{{"SLURM_STEP_NUM_TASKS", "2"}}, 8888, {}, "",
                  "SLURM_PROCID is not set: --from-slurm must run inside a Slurm job step (under srun)"},
        SlurmCase{"NoNumTasks", EnvironmentMap{{"SLURM_PROCID", "0"}}, 8888, {}, "",
                  "neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is set: --from-slurm must run inside "
                  "a Slurm job step (under srun)"},
        SlurmCase{"NoNodeList", EnvironmentMap{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}, 8888, {},
                  "",
                  "neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set: --from-slurm must run "
                  "inside a Slurm job step (under srun)"},
        SlurmCase{"ProcidNotNumber", Step("x", "2", "a,b", "1(x2)", nullptr), 8888, {}, "",
                  "SLURM_PROCID \"x\" is not a non-negative integer"},
        SlurmCase{"ProcidOutOfRange", Step("4", "4", "a,b", "2(x2)", nullptr), 8888, {}, "",
                  "SLURM_PROCID 4 is out of range: SLURM_STEP_NUM_TASKS is 4"},
        SlurmCase{"BadNodeList", Step("0", "2", "node[1-", "1(x2)", nullptr), 8888, {}, "",
                  "SLURM_STEP_NODELIST \"node[1-\": \"[\" is never closed"},
        SlurmCase{"DuplicateHost", Step("0", "2", "a,a", "1(x2)", nullptr), 8888, {}, "",
                  "SLURM_STEP_NODELIST \"a,a\" names host \"a\" twice"},
        SlurmCase{"BadTasksPerNode", Step("0", "2", "a,b", "1(y2)", nullptr), 8888, {}, "",
                  "SLURM_STEP_TASKS_PER_NODE \"1(y2)\": entry \"1(y2)\" is not N or N(xR)"},
        SlurmCase{"NodeCountMismatch", Step("0", "6", "node[1-2]", "2(x3)", nullptr), 8888, {}, "",
                  "SLURM_STEP_TASKS_PER_NODE \"2(x3)\" lists 3 nodes but SLURM_STEP_NODELIST "
                  "\"node[1-2]\" has 2"},
        SlurmCase{"TaskTotalMismatch", Step("0", "3", "a,b", "2(x2)", nullptr), 8888, {}, "",
                  "SLURM_STEP_TASKS_PER_NODE \"2(x2)\" adds up to 4 tasks but SLURM_STEP_NUM_TASKS is 3"},
        SlurmCase{"LocalIdMismatch", Step("2", "4", "node[1-2]", "2(x2)", "1"), 8888, {}, "",
                  "SLURM_LOCALID 1 does not match SLURM_PROCID 2: by SLURM_STEP_TASKS_PER_NODE "
                  "\"2(x2)\" rank 2 is local task 0 on node2 (run srun with the default block "
                  "distribution, --distribution=block)"},
        SlurmCase{"NodeIdMismatch",
                  [] {
                    EnvironmentMap env = Step("1", "2", "node[01-02]", "1(x2)", "0");
                    env["SLURM_NODEID"] = "0";
                    return env;
                  }(),
                  8888, {}, "",
                  "SLURM_NODEID 0 does not match SLURM_PROCID 1: by SLURM_STEP_TASKS_PER_NODE \"1(x2)\" rank 1 runs "
                  "on node 1 (node02)"},
        SlurmCase{"NodeNameMismatch",
                  [] {
                    EnvironmentMap env = Step("1", "2", "node[01-02]", "1(x2)", "0");
                    env["SLURM_NODEID"] = "1";
                    env["SLURMD_NODENAME"] = "node01";
                    return env;
                  }(),
                  8888, {}, "",
                  "SLURMD_NODENAME \"node01\" does not match SLURM_PROCID 1: by SLURM_STEP_NODELIST and "
                  "SLURM_STEP_TASKS_PER_NODE rank 1 runs on node02"},
        SlurmCase{"PortBaseOverflow", Step("0", "2", "a", "2", nullptr), 65535, {}, "",
                  "--slurm-port-base 65535 + 2 tasks on one node goes past port 65535"},
        SlurmCase{"PortBaseZero", Step("0", "1", "a", "1", nullptr), 0, {}, "",
                  "--slurm-port-base 0 is out of range 1-65535"},
        SlurmCase{"ZeroTasks", Step("0", "0", "a", "1", nullptr), 8888, {}, "",
                  "SLURM_STEP_NUM_TASKS is 0: the step has no task"}),
    [](const ::testing::TestParamInfo<SlurmCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mirrored
