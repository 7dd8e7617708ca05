#include "launcher/job/local_job_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

namespace mirrored {
namespace {

std::string EnvValue(const TaskLaunch& t, const std::string& key) {
  for (const auto& e : t.env)
    if (e.rfind(key + "=", 0) == 0) return e.substr(key.size() + 1);
  return "<unset>";
}

LocalJobOptions Options() {
  LocalJobOptions o;
  o.workers = 2;
  o.run_dir = "/tmp/run";
  o.program = {.argv = {"/bin/true", "--model", "mlp"}, .is_mirrored_worker = true};
  return o;
}

TEST(LocalJobPlanTest, EveryTaskGetsItsTfConfigTokenAndArguments) {
  LocalJobOptions o = Options();
  o.evaluator = true;
  o.cpu_replicas = 2;
  o.omp_num_threads = "3";
  auto plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto tasks = plan->Tasks(3, {"PATH=/bin", "TF_CONFIG=stale", "MIRRORED_JOB_TOKEN=old", "HOME=/h",
                               "MIRRORED_GENERATION=9", "MIRRORED_DATA_CACHE=/c", "MIRRORED_TRAINING_ENDED=1",
                               "OMP_NUM_THREADS=8"});
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].name, "worker:0");
  EXPECT_EQ(tasks[1].name, "worker:1");
  EXPECT_EQ(tasks[2].name, "evaluator:0");
  EXPECT_FALSE(tasks[2].is_training);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskLaunch& t = tasks[i];
    auto tf = nlohmann::json::parse(EnvValue(t, "TF_CONFIG"));
    EXPECT_EQ(tf["cluster"]["worker"].size(), 2u);
    EXPECT_FALSE(tf["cluster"].contains("evaluator"));
    EXPECT_EQ(tf["cluster"]["worker"][0], plan->coordinator_address());
    EXPECT_EQ(tf["task"]["type"], i < 2 ? "worker" : "evaluator");
    EXPECT_EQ(tf["task"]["index"], i < 2 ? static_cast<int>(i) : 0);
    EXPECT_EQ(tf["rpc_layer"], "grpc");
    EXPECT_EQ(EnvValue(t, "MIRRORED_JOB_TOKEN"), plan->job_token());
    EXPECT_EQ(EnvValue(t, "MIRRORED_GENERATION"), "3");
    EXPECT_EQ(EnvValue(t, "MIRRORED_WHOLE_JOB_SIGNALLED"), "1");  // a Ctrl-C reaches every task at once
    EXPECT_EQ(EnvValue(t, "PATH"), "/bin");
    EXPECT_EQ(EnvValue(t, "MIRRORED_DATA_CACHE"), "/c");  // the user's own settings pass through
    // Only the supervisor says that training ended (to a restarted evaluator).
    EXPECT_FALSE(std::any_of(t.env.begin(), t.env.end(), [](const std::string& e) {
      return e.rfind("MIRRORED_TRAINING_ENDED=", 0) == 0;
    }));
    EXPECT_EQ(EnvValue(t, "CUDA_VISIBLE_DEVICES"), "");
    EXPECT_EQ(t.argv, (std::vector<std::string>{"/bin/true", "--model", "mlp", "--run-dir",
                                                "/tmp/run", "--cpu-replicas", "2"}));
    EXPECT_EQ(t.log_path, "/tmp/run/logs/" + t.name + ".log");
    // Exactly one TF_CONFIG: the stale one is gone.
    EXPECT_EQ(std::count_if(t.env.begin(), t.env.end(),
                            [](const std::string& e) { return e.rfind("TF_CONFIG=", 0) == 0; }),
              1);
    EXPECT_EQ(std::count_if(t.env.begin(), t.env.end(),
                            [](const std::string& e) { return e.rfind("MIRRORED_GENERATION=", 0) == 0; }),
              1);
    // Each task's share of the cores, once.
    EXPECT_EQ(EnvValue(t, "OMP_NUM_THREADS"), "3");
    EXPECT_EQ(std::count_if(t.env.begin(), t.env.end(),
                            [](const std::string& e) { return e.rfind("OMP_NUM_THREADS=", 0) == 0; }),
              1);
  }
  EXPECT_EQ(plan->job_token().size(), 32u);
}

// The bytes every task's TF_CONFIG has, the evaluator's included (it is no
// member of the cluster): those `cluster` writes for the same cluster and
// task, TensorFlow's keys in sorted order.
TEST(LocalJobPlanTest, TfConfigIsWrittenAsTheClusterCommandWritesIt) {
  LocalJobOptions o = Options();
  o.evaluator = true;
  auto plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto tasks = plan->Tasks(0, {});
  ASSERT_EQ(tasks.size(), 3u);
  auto tf = nlohmann::json::parse(EnvValue(tasks[0], "TF_CONFIG"));
  const std::string cluster = R"({"cluster":{"worker":[")" + tf["cluster"]["worker"][0].get<std::string>() +
                              R"(",")" + tf["cluster"]["worker"][1].get<std::string>() + R"("]},"rpc_layer":"grpc",)";
  EXPECT_EQ(plan->coordinator_address(), tf["cluster"]["worker"][0].get<std::string>());
  EXPECT_EQ(plan->coordinator_address().rfind("127.0.0.1:", 0), 0u);
  EXPECT_EQ(EnvValue(tasks[0], "TF_CONFIG"), cluster + R"("task":{"index":0,"type":"worker"}})");
  EXPECT_EQ(EnvValue(tasks[1], "TF_CONFIG"), cluster + R"("task":{"index":1,"type":"worker"}})");
  EXPECT_EQ(EnvValue(tasks[2], "TF_CONFIG"), cluster + R"("task":{"index":0,"type":"evaluator"}})");
}

TEST(LocalJobPlanTest, VisibleGpusAreSplitEvenlyAcrossWorkers) {
  LocalJobOptions o = Options();
  o.visible_gpus = {"0", "1", "2", "3", "4"};
  auto plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto tasks = plan->Tasks(0, {});
  EXPECT_EQ(EnvValue(tasks[0], "CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(EnvValue(tasks[1], "CUDA_VISIBLE_DEVICES"), "2,3");
  o.gpus_per_worker = 1;
  plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  tasks = plan->Tasks(0, {});
  EXPECT_EQ(EnvValue(tasks[1], "CUDA_VISIBLE_DEVICES"), "1");
}

// --gpus-per-worker 0: CPU replicas only, on a machine with GPUs.
TEST(LocalJobPlanTest, ZeroGpusPerWorkerHidesEveryGpu) {
  LocalJobOptions o = Options();
  o.visible_gpus = {"0", "1"};
  o.gpus_per_worker = 0;
  o.cpu_replicas = 2;
  auto plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const TaskLaunch& t : plan->Tasks(0, {})) {
    EXPECT_EQ(EnvValue(t, "CUDA_VISIBLE_DEVICES"), "") << t.name;
    EXPECT_NE(std::find(t.argv.begin(), t.argv.end(), "--cpu-replicas"), t.argv.end()) << t.name;
  }
}

TEST(LocalJobPlanTest, InvalidOptionsNameTheFlag) {
  LocalJobOptions o = Options();
  o.workers = 0;
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "--workers 0 is out of range: a local job has 1 to 256 workers");
  o = Options();
  o.gpus_per_worker = 2;
  o.visible_gpus = {"0"};
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "--gpus-per-worker 2 x --workers 2 needs 4 GPUs, 1 visible");
  o.workers = 1;
  o.gpus_per_worker = 1;
  o.visible_gpus = {};
  EXPECT_EQ(PlanLocalJob(o).status().message(), "--gpus-per-worker 1 x --workers 1 needs 1 GPU, 0 visible");
  // The product overflowed int (and the plan then threw std::bad_alloc).
  o.workers = 2;
  o.gpus_per_worker = 2147483647;
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "--gpus-per-worker 2147483647 x --workers 2 needs 4294967294 GPUs, 0 visible");
  o.gpus_per_worker = -1;
  EXPECT_EQ(PlanLocalJob(o).status().message(), "--gpus-per-worker -1 must not be negative");
  o = Options();
  o.cpu_replicas = 0;
  EXPECT_EQ(PlanLocalJob(o).status().message(), "--cpu-replicas 0 must be at least 1");
  o = Options();
  o.program.argv = {"/nonexistent/mirrored-worker"};
  auto missing = PlanLocalJob(o);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ExitCodeFor(missing.status()), 2);
  EXPECT_EQ(missing.status().message(),
            "worker binary /nonexistent/mirrored-worker does not exist (build it, or pass "
            "--worker-binary PATH)");
  char path[] = "/tmp/mirrored-not-exec-XXXXXX";
  close(mkstemp(path));  // mode 0600: not executable
  o.program.argv = {path};
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "worker binary " + std::string(path) + " is not executable");
  unlink(path);
  o.program.argv = {"/tmp"};  // said "is not executable"
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "worker binary /tmp is a directory, not a program (pass --worker-binary PATH/mirrored-worker)");
}

// --evaluator-gpus not given (or 0): the evaluator gets no GPU, on a machine
// with GPUs too; the workers split all of them.
TEST(LocalJobPlanTest, EvaluatorGetsNoGpuUnlessAsked) {
  for (const std::optional<int> asked : {std::optional<int>(), std::optional<int>(0)}) {
    LocalJobOptions o = Options();
    o.workers = 1;
    o.evaluator = true;
    o.evaluator_gpus = asked;
    o.visible_gpus = {"0", "1"};
    auto plan = PlanLocalJob(o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto tasks = plan->Tasks(0, {"CUDA_VISIBLE_DEVICES=0,1"});
    ASSERT_EQ(tasks.size(), 2u);
    EXPECT_EQ(EnvValue(tasks[0], "CUDA_VISIBLE_DEVICES"), "0,1");
    EXPECT_EQ(EnvValue(tasks[1], "CUDA_VISIBLE_DEVICES"), "");
  }
}

// The workers take theirs first, in order; the evaluator the next N.
TEST(LocalJobPlanTest, EvaluatorGpusAreTheNextAfterTheWorkers) {
  LocalJobOptions o = Options();
  o.workers = 1;
  o.gpus_per_worker = 1;
  o.evaluator = true;
  o.evaluator_gpus = 1;
  o.cpu_replicas = 2;
  o.visible_gpus = {"0", "1"};
  auto plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto tasks = plan->Tasks(0, {});
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(EnvValue(tasks[0], "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(tasks[1].name, "evaluator:0");
  EXPECT_EQ(EnvValue(tasks[1], "CUDA_VISIBLE_DEVICES"), "1");
  // With a GPU, as a worker with one: no --cpu-replicas.
  EXPECT_EQ(std::find(tasks[1].argv.begin(), tasks[1].argv.end(), "--cpu-replicas"), tasks[1].argv.end());
  // CPU-only workers (--gpus-per-worker 0) beside an evaluator on a GPU.
  o.gpus_per_worker = 0;
  plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  tasks = plan->Tasks(0, {});
  EXPECT_EQ(EnvValue(tasks[0], "CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(EnvValue(tasks[1], "CUDA_VISIBLE_DEVICES"), "0");
}

// Without --gpus-per-worker the workers split evenly what the evaluator
// leaves them; leftovers (between the workers' and the evaluator's) idle.
TEST(LocalJobPlanTest, AutomaticSplitLeavesTheEvaluatorGpusOut) {
  auto devices = [](int visible, int workers, int evaluator_gpus) {
    LocalJobOptions o = Options();
    o.workers = workers;
    o.evaluator = true;
    o.evaluator_gpus = evaluator_gpus;
    for (int i = 0; i < visible; ++i) o.visible_gpus.push_back(std::to_string(i));
    auto plan = PlanLocalJob(o);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<std::string> out;
    if (!plan.ok()) return out;
    for (const TaskLaunch& t : plan->Tasks(0, {})) out.push_back(EnvValue(t, "CUDA_VISIBLE_DEVICES"));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(devices(5, 2, 1), (V{"0,1", "2,3", "4"}));
  EXPECT_EQ(devices(6, 2, 1), (V{"0,1", "2,3", "4"}));  // GPU 5 idle
  EXPECT_EQ(devices(4, 2, 2), (V{"0", "1", "2,3"}));
  EXPECT_EQ(devices(3, 1, 1), (V{"0,1", "2"}));
  EXPECT_EQ(devices(1, 1, 1), (V{"", "0"}));  // asked for: the workers train on CPU replicas
}

TEST(LocalJobPlanTest, InvalidEvaluatorGpusNameTheFlag) {
  LocalJobOptions o = Options();
  o.evaluator = true;
  o.workers = 2;
  o.gpus_per_worker = 1;
  o.evaluator_gpus = 1;
  o.visible_gpus = {"0", "1"};
  auto refused = PlanLocalJob(o);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExitCodeFor(refused.status()), 2);
  EXPECT_EQ(refused.status().message(),
            "--evaluator-gpus 1 needs 1 GPU besides the 2 the workers take (--gpus-per-worker 1 x --workers 2): "
            "3 in all, 2 visible");
  o.evaluator_gpus = 2;
  o.visible_gpus = {"0", "1", "2"};
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "--evaluator-gpus 2 needs 2 GPUs besides the 2 the workers take (--gpus-per-worker 1 x --workers 2): "
            "4 in all, 3 visible");
  // The workers' own shortfall is said as before.
  o.gpus_per_worker = 2;
  EXPECT_EQ(PlanLocalJob(o).status().message(), "--gpus-per-worker 2 x --workers 2 needs 4 GPUs, 3 visible");
  // Without --gpus-per-worker: the evaluator's first, the workers split the rest.
  o.gpus_per_worker.reset();
  o.evaluator_gpus = 4;
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "--evaluator-gpus 4 needs 4 GPUs, 3 visible (without --gpus-per-worker the workers split what it "
            "leaves)");
  o.evaluator_gpus = 1;
  o.visible_gpus = {};
  EXPECT_EQ(PlanLocalJob(o).status().message(),
            "--evaluator-gpus 1 needs 1 GPU, 0 visible (without --gpus-per-worker the workers split what it "
            "leaves)");
  o.evaluator_gpus = -1;
  EXPECT_EQ(PlanLocalJob(o).status().message(), "--evaluator-gpus -1 must not be negative");
  // Without --evaluator, whatever the count: no evaluator would use them.
  o.evaluator = false;
  o.visible_gpus = {"0", "1"};
  for (int asked : {1, 0}) {
    o.evaluator_gpus = asked;
    auto alone = PlanLocalJob(o);
    EXPECT_EQ(ExitCodeFor(alone.status()), 2);
    EXPECT_EQ(alone.status().message(), "--evaluator-gpus " + std::to_string(asked) +
                                            " needs --evaluator: without it no evaluator runs to use them");
  }
}

// A container given the host's GPUs 2 and 3 has /dev/nvidia2 and
// /dev/nvidia3 (and nvidiactl, nvidia-uvm): CUDA numbers them 0 and 1.
TEST(LocalJobPlanTest, VisibleGpusFromDeviceNodesAreCudasNumbersNotTheMinors) {
  const std::filesystem::path dev =
      std::filesystem::temp_directory_path() / ("mirrored-dev-" + std::to_string(getpid()));
  std::filesystem::create_directories(dev);
  for (const char* name : {"nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-caps", "null"})
    std::ofstream(dev / name) << "";
  EXPECT_EQ(VisibleGpus({"PATH=/usr/bin"}, dev.string()), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(VisibleGpus({"CUDA_VISIBLE_DEVICES=1"}, dev.string()), (std::vector<std::string>{"1"}));
  std::filesystem::remove_all(dev);
  EXPECT_TRUE(VisibleGpus({"PATH=/usr/bin"}, dev.string()).empty());  // no such directory: no GPU
}

TEST(LocalJobPlanTest, VisibleGpusFollowCudaVisibleDevices) {
  EXPECT_EQ(VisibleGpus({"CUDA_VISIBLE_DEVICES=2,5"}), (std::vector<std::string>{"2", "5"}));
  EXPECT_TRUE(VisibleGpus({"CUDA_VISIBLE_DEVICES="}).empty());
  EXPECT_TRUE(VisibleGpus({"CUDA_VISIBLE_DEVICES=-1"}).empty());
}

}  // namespace
}  // namespace mirrored

namespace mirrored {
namespace {

// A user's program after `--`: its arguments as given (no --run-dir, no
// --cpu-replicas), MIRRORED_RUN_DIR, no job token, and torch.distributed's
// variables for the training tasks (worker:0 is rank 0 and the master).
TEST(LocalJobPlanUserProgramTest, TasksGetTorchrunsVariablesAndTheirArgumentsAsGiven) {
  LocalJobOptions o;
  o.workers = 2;
  o.run_dir = "/tmp/run-7";
  o.evaluator = true;
  o.cpu_replicas = 2;
  o.max_restarts = 4;
  o.program = {.argv = {"/usr/bin/python3", "train.py", "--epochs", "3"}, .is_mirrored_worker = false};
  o.evaluator_program = TaskProgram{.argv = {"/usr/bin/python3", "eval.py"}, .is_mirrored_worker = false};
  auto plan = PlanLocalJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->runs_mirrored_worker());
  auto tasks = plan->Tasks(1, {"PATH=/bin", "RANK=9", "MASTER_PORT=1", "MIRRORED_RUN_DIR=/elsewhere"});
  ASSERT_EQ(tasks.size(), 3u);
  const std::string master_port = plan->coordinator_address().substr(plan->coordinator_address().find(':') + 1);
  for (int i = 0; i < 2; ++i) {
    const TaskLaunch& t = tasks[i];
    EXPECT_EQ(t.argv, (std::vector<std::string>{"/usr/bin/python3", "train.py", "--epochs", "3"}));
    EXPECT_FALSE(t.reports_liveness);
    EXPECT_EQ(t.error_file, "/tmp/run-7/logs/worker:" + std::to_string(i) + ".error.json");
    EXPECT_EQ(EnvValue(t, "RANK"), std::to_string(i));
    EXPECT_EQ(EnvValue(t, "LOCAL_RANK"), std::to_string(i));
    EXPECT_EQ(EnvValue(t, "WORLD_SIZE"), "2");
    EXPECT_EQ(EnvValue(t, "MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(EnvValue(t, "MASTER_PORT"), master_port);
    EXPECT_EQ(EnvValue(t, "TORCHELASTIC_RESTART_COUNT"), "1");
    EXPECT_EQ(EnvValue(t, "TORCHELASTIC_MAX_RESTARTS"), "4");
    EXPECT_EQ(EnvValue(t, "TORCHELASTIC_ERROR_FILE"), t.error_file);
    EXPECT_EQ(EnvValue(t, "MIRRORED_RUN_DIR"), "/tmp/run-7");
    EXPECT_EQ(EnvValue(t, "MIRRORED_JOB_TOKEN"), "<unset>");
    EXPECT_EQ(EnvValue(t, "PYTHONUNBUFFERED"), "1");
    EXPECT_EQ(std::count_if(t.env.begin(), t.env.end(), [](const std::string& e) { return e.rfind("RANK=", 0) == 0; }),
              1);
  }
  const TaskLaunch& evaluator = tasks[2];
  EXPECT_EQ(evaluator.argv, (std::vector<std::string>{"/usr/bin/python3", "eval.py"}));
  EXPECT_EQ(EnvValue(evaluator, "RANK"), "<unset>");  // not in the training world; the inherited one is gone
  EXPECT_EQ(EnvValue(evaluator, "MIRRORED_RUN_DIR"), "/tmp/run-7");
  EXPECT_EQ(nlohmann::json::parse(EnvValue(evaluator, "TF_CONFIG"))["task"]["type"], "evaluator");
  EXPECT_TRUE(evaluator.error_file.empty());
}

}  // namespace
}  // namespace mirrored
