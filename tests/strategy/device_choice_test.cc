// --device resolution (DESIGN.md, "Replicas"), without a GPU: the decision
// from what the CUDA runtime says, the strategy and mirrored-worker on this
// host (skipped where a GPU is visible: there they train, see
// gpu_train_test.cc), and the rendezvous check that every task of a job runs
// the same kind of replica.
#include "worker/strategy/device_choice.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "common/cluster/tf_config_parser.h"
#include "launcher/job/port_reservation.h"
#include "mirrored/config.h"
#include "tests/util/worker_process.h"
#include "worker/strategy/mirrored_strategy.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

const GpuProbe kNoGpu{0, "cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected"};
const GpuProbe kTwoGpus{2, ""};

// How the error explains the missing GPU: the CUDA runtime's answer, or the
// build's lack of CUDA.
const char* const kNoGpuReason = kWithCuda ? "(cudaGetDeviceCount" : "(this mirrored-worker was built without CUDA";

#define SKIP_WITH_A_GPU() \
  if (ProbeGpus().count > 0) GTEST_SKIP() << "a GPU is visible: --device auto/gpu train on it (gpu_train_test)"

TEST(DeviceChoiceTest, ParsesTheThreeKindsAndNamesTheFlagOtherwise) {
  EXPECT_EQ(*ParseDeviceKind("auto"), DeviceKind::kAuto);
  EXPECT_EQ(*ParseDeviceKind("cpu"), DeviceKind::kCpu);
  EXPECT_EQ(*ParseDeviceKind("gpu"), DeviceKind::kGpu);
  auto bad = ParseDeviceKind("cuda");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--device \"cuda\" is not one of auto, cpu, gpu"), std::string::npos);
  EXPECT_EQ(DeviceKindName(DeviceKind::kGpu), "gpu");
}

TEST(DeviceChoiceTest, AutoIsCpuReplicasWithoutAGpuAndEveryGpuWithThem) {
  auto cpu = ResolveReplicaDevices(DeviceKind::kAuto, 3, kNoGpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cpu->gpu);
  EXPECT_EQ(cpu->local_replicas(), 3);
  EXPECT_EQ(cpu->Describe(), "3 CPU replicas");

  auto gpu = ResolveReplicaDevices(DeviceKind::kAuto, 3, kTwoGpus);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE(gpu->gpu);
  EXPECT_EQ(gpu->gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(gpu->local_replicas(), 2);  // --cpu-replicas does not apply
  EXPECT_EQ(gpu->Describe(), "2 GPU replicas (GPUs 0,1)");
}

TEST(DeviceChoiceTest, CpuIgnoresGpusAndGpuTakesEveryVisibleOne) {
  auto cpu = ResolveReplicaDevices(DeviceKind::kCpu, 1, kTwoGpus);
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->gpu);
  EXPECT_EQ(cpu->Describe(), "1 CPU replica");

  auto one = ResolveReplicaDevices(DeviceKind::kGpu, 4, GpuProbe{1, ""});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->gpus, std::vector<int>{0});
  EXPECT_EQ(one->Describe(), "1 GPU replica (GPU 0)");
}

TEST(DeviceChoiceTest, GpuWithoutADeviceIsAConfigurationErrorQuotingTheRuntime) {
  auto r = ResolveReplicaDevices(DeviceKind::kGpu, 1, kNoGpu);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExitCodeFor(r.status()), kExitUsage);  // a restart cannot add a GPU
  EXPECT_NE(r.status().message().find("--device gpu: no usable GPU"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("no CUDA-capable device is detected"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("CUDA_VISIBLE_DEVICES"), std::string::npos) << r.status();
}

TEST(DeviceChoiceTest, ProbeExplainsAZeroCount) {
  GpuProbe p = ProbeGpus();
  if (p.count > 0) {
    EXPECT_TRUE(p.error.empty()) << p.error;
  } else {
    EXPECT_FALSE(p.error.empty());  // the runtime's words, or "built without CUDA"
  }
}

TEST(DeviceChoiceStrategyTest, GpuOnThisHostFailsBeforeJoiningAndAutoRunsCpuReplicas) {
  SKIP_WITH_A_GPU();
  StrategyOptions gpu;
  gpu.device = DeviceKind::kGpu;
  auto refused = MirroredStrategy::Create(SingleLocalTaskConfig("test"), gpu);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find(kNoGpuReason), std::string::npos) << refused.status();

  StrategyOptions automatic;
  automatic.device = DeviceKind::kAuto;
  automatic.cpu_replicas = 2;
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), automatic);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  EXPECT_FALSE((*strategy)->on_gpu());
  EXPECT_EQ((*strategy)->local_replicas(), 2);
  EXPECT_NE((*strategy)->Describe().find("2 CPU replicas"), std::string::npos) << (*strategy)->Describe();
  std::vector<int> gpus(2, 99);
  Status s = (*strategy)->RunReplicas([&](ReplicaContext& r) -> Status {
    gpus[static_cast<size_t>(r.local_replica())] = r.gpu();
    MIRRORED_ASSIGN_OR_RETURN(auto backend, r.MakeBackend());
    if (backend->is_gpu()) return InternalError("a CPU replica got " + backend->name());
    std::vector<float> v = {1.0f, 2.0f};
    MIRRORED_RETURN_IF_ERROR(r.SumAcrossReplicas(v));
    if (v != std::vector<float>{2.0f, 4.0f}) return InternalError("wrong sum");
    return OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(gpus, (std::vector<int>{-1, -1}));
}

// A replica function that throws (as the GPU backend's kernels throw
// CudaError) fails its replica with the exception's text; the replica
// waiting for it in a collective is aborted instead of hanging.
TEST(DeviceChoiceStrategyTest, AnExceptionInAReplicaIsItsErrorAndAbortsTheOthers) {
  StrategyOptions cpu;
  cpu.device = DeviceKind::kCpu;
  cpu.cpu_replicas = 2;
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), cpu);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  Status s = (*strategy)->RunReplicas([&](ReplicaContext& r) -> Status {
    if (r.local_replica() == 1) throw std::runtime_error("cudnnConvolutionForward failed: CUDNN_STATUS_EXECUTION_FAILED");
    std::vector<float> v = {1.0f};
    return r.SumAcrossReplicas(v);  // replica 1 never comes
  });
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("replica 1: cudnnConvolutionForward failed: CUDNN_STATUS_EXECUTION_FAILED"),
            std::string::npos)
      << s;
}

// worker:1 believes it has a GPU (a fake probe), worker:0 runs CPU replicas:
// both learn it at rendezvous and fail with InvalidArgument naming both,
// instead of one waiting in NCCL's init and the other in Gloo's connect.
// worker:1 never reaches CUDA: the check comes before its communicators.
TEST(DeviceChoiceStrategyTest, TasksWithDifferentReplicaDevicesAreRefusedAtRendezvous) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok());
  std::vector<Status> results(2);
  std::vector<std::thread> tasks;
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] {
      auto config = ParseTfConfig(R"({"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                                  R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}");
      if (!config.ok()) {
        results[index] = config.status();
        return;
      }
      StrategyOptions so;
      so.device = index == 0 ? DeviceKind::kCpu : DeviceKind::kGpu;
      so.gpu_probe = [] { return GpuProbe{1, ""}; };
      so.job_token = "device-kinds";
      so.registration_timeout = 20s;
      so.collective_timeout = 20s;
      auto strategy = MirroredStrategy::Create(*config, so);
      results[index] = strategy.ok() ? OkStatus() : strategy.status();
    });
  }
  for (auto& t : tasks) t.join();
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("tasks disagree on the replica device (worker:0 cpu, worker:1 gpu)"),
              std::string::npos)
        << s;
  }
}

// Two tasks in one process (threads): agreeing settings pass CheckTasksAgree,
// and Shutdown runs once (a second call returns the first one's result).
TEST(DeviceChoiceStrategyTest, AgreeingTasksPassTheSettingsCheckAndShutdownTwice) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok());
  std::vector<Status> checks(2), first(2), second(2);
  std::vector<std::thread> tasks;
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] {
      auto config = ParseTfConfig(R"({"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                                  R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}");
      ASSERT_TRUE(config.ok()) << config.status();
      StrategyOptions so;
      so.job_token = "agree";
      so.registration_timeout = 20s;
      so.collective_timeout = 20s;
      auto strategy = MirroredStrategy::Create(*config, so);
      ASSERT_TRUE(strategy.ok()) << strategy.status();
      checks[index] = (*strategy)->CheckTasksAgree({{"--model", "mlp"}, {"--seed", "7"}});
      first[index] = (*strategy)->Shutdown();
      second[index] = (*strategy)->Shutdown();
    });
  }
  for (auto& t : tasks) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(checks[i].ok()) << checks[i];
    EXPECT_TRUE(first[i].ok()) << first[i];
    EXPECT_TRUE(second[i].ok()) << second[i];
  }
}

TEST(DeviceChoiceWorkerTest, DeviceGpuWithoutAGpuExitsTwoNamingTheProblem) {
  SKIP_WITH_A_GPU();
  auto w = testing_util::WorkerProcess::Start(
      {std::string(MIRRORED_BIN_DIR) + "/mirrored-worker", "--device", "gpu", "--model", "mlp", "--max-steps", "1"},
      {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(w.ok()) << w.status();
  auto exit = (*w)->WaitExit(60s);
  ASSERT_TRUE(exit.has_value()) << (*w)->output();
  EXPECT_EQ(exit->exit_code, kExitUsage) << exit->ToString() << "\n" << (*w)->output();
  EXPECT_NE((*w)->output().find(std::string("error: --device gpu: no usable GPU ") + kNoGpuReason), std::string::npos)
      << (*w)->output();
}

// A task whose flags or --data are refused never joins; it tells the chief's service,
// so the chief (waiting for the job to form, registration timeout 300 s)
// stops at once naming its error, and is not restarted for it (exit 3, the
// relayed error one of configuration).
TEST(DeviceChoiceWorkerTest, ATaskRefusedBeforeJoiningStopsTheChiefAtOnce) {
  const std::string bin = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
  for (const auto& [bad_flags, relayed] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--model", "mpl"}, "INVALID_ARGUMENT: --model \"mpl\" is not one of mlp, cnn, resnet"},
           {{"--model", "mlp", "--data", "/nonexistent"},
            "NOT_FOUND: /nonexistent/train-images-idx3-ubyte.gz: no such file"}}) {
    auto p0 = PortReservation::Reserve();
    auto p1 = PortReservation::Reserve();
    ASSERT_TRUE(p0.ok() && p1.ok());
    auto tf_config = [&](int index) {
      return R"(TF_CONFIG={"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
             R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}";
    };
    auto chief = testing_util::WorkerProcess::Start({bin, "--model", "mlp", "--device", "cpu", "--max-steps", "1"},
                                                    {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", tf_config(0)});
    ASSERT_TRUE(chief.ok()) << chief.status();
    std::vector<std::string> argv = {bin, "--device", "cpu", "--max-steps", "1"};
    argv.insert(argv.end(), bad_flags.begin(), bad_flags.end());
    auto bad = testing_util::WorkerProcess::Start(argv, {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", tf_config(1)});
    ASSERT_TRUE(bad.ok()) << bad.status();
    auto bad_exit = (*bad)->WaitExit(30s);
    ASSERT_TRUE(bad_exit.has_value()) << (*bad)->output();
    EXPECT_EQ(bad_exit->exit_code, kExitUsage) << (*bad)->output();
    auto chief_exit = (*chief)->WaitExit(30s);
    ASSERT_TRUE(chief_exit.has_value()) << (*chief)->output();
    EXPECT_EQ(chief_exit->exit_code, kExitPeerFailed) << (*chief)->output();
    EXPECT_NE((*chief)->output().find("task worker:1 failed at "), std::string::npos) << (*chief)->output();
    EXPECT_NE((*chief)->output().find("exited with error: " + relayed), std::string::npos) << (*chief)->output();
    EXPECT_NE((*chief)->output().find("(before it joined the job)"), std::string::npos) << (*chief)->output();
  }
}

// The chief refused before joining (a bad flag, a wrong --data) hosts its
// error in place of the service, so a task registering stops at once naming
// it (exit 3, the error one of configuration), instead of waiting out its
// registration timeout (300 s); even a restarted one (generation 1), which
// would otherwise wait for the next generation of the chief.
TEST(DeviceChoiceWorkerTest, TheChiefRefusedBeforeJoiningStopsTheOthersAtOnce) {
  const std::string bin = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
  for (const std::string generation : {"0", "1"}) {
    auto p0 = PortReservation::Reserve();
    auto p1 = PortReservation::Reserve();
    ASSERT_TRUE(p0.ok() && p1.ok());
    auto tf_config = [&](int index) {
      return R"(TF_CONFIG={"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
             R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}";
    };
    auto other = testing_util::WorkerProcess::Start(
        {bin, "--model", "mlp", "--device", "cpu", "--max-steps", "1"},
        {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", "MIRRORED_GENERATION=" + generation, tf_config(1)});
    ASSERT_TRUE(other.ok()) << other.status();
    auto chief = testing_util::WorkerProcess::Start({bin, "--device", "cpu", "--max-steps", "1", "--data", "/nonexistent"},
                                                    {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", tf_config(0)});
    ASSERT_TRUE(chief.ok()) << chief.status();
    auto other_exit = (*other)->WaitExit(60s);
    ASSERT_TRUE(other_exit.has_value()) << (*other)->output();
    EXPECT_EQ(other_exit->exit_code, kExitPeerFailed) << (*other)->output();
    EXPECT_NE((*other)->output().find("task worker:0 failed at "), std::string::npos) << (*other)->output();
    EXPECT_NE((*other)->output().find("exited with error: NOT_FOUND: /nonexistent/train-images-idx3-ubyte.gz: no such "
                                      "file"),
              std::string::npos)
        << (*other)->output();
    auto chief_exit = (*chief)->WaitExit(30s);
    ASSERT_TRUE(chief_exit.has_value()) << (*chief)->output();
    EXPECT_EQ(chief_exit->exit_code, kExitUsage) << (*chief)->output();
  }
}

// The serve window ends on SIGTERM (a launcher stopping the job), with the
// chief's own exit code, its error said before it began serving.
TEST(DeviceChoiceWorkerTest, TheChiefStopsServingItsErrorOnSigtermWithItsOwnCode) {
  const std::string bin = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok());
  const std::string tf_config = R"(TF_CONFIG={"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                                R"("]},"task":{"type":"worker","index":0}})";
  auto chief = testing_util::WorkerProcess::Start({bin, "--device", "cpu", "--data", "/nonexistent"},
                                                  {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", tf_config});
  ASSERT_TRUE(chief.ok()) << chief.status();
  ASSERT_TRUE((*chief)->WaitForOutput("serving this error at", 30s)) << (*chief)->output();
  EXPECT_NE((*chief)->output().find("error: /nonexistent/train-images-idx3-ubyte.gz: no such file"), std::string::npos)
      << "the error is said before serving it:\n" << (*chief)->output();
  ASSERT_EQ(kill((*chief)->child().pid(), SIGTERM), 0);
  auto exit = (*chief)->WaitExit(30s);
  ASSERT_TRUE(exit.has_value()) << (*chief)->output();
  EXPECT_EQ(exit->exit_code, kExitUsage) << (*chief)->output();
  EXPECT_NE((*chief)->output().find("stopped serving this error on SIGTERM (15)"), std::string::npos)
      << (*chief)->output();
}

// A chief whose Create fails after its service started (here every task's
// registration fails: another task was started with another cluster) has
// told every task of its cluster through that service: there is no one
// left to serve the error to, and it exits at once.
TEST(DeviceChoiceWorkerTest, AChiefFailingAfterItsServiceRanDoesNotServeAgain) {
  const std::string bin = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  auto p2 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok() && p2.ok());
  const std::string two = R"(")" + p0->address() + R"(",")" + p1->address() + R"(")";
  auto chief = testing_util::WorkerProcess::Start(
      {bin, "--device", "cpu", "--model", "mlp", "--max-steps", "1"},
      {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t",
       R"(TF_CONFIG={"cluster":{"worker":[)" + two + R"(]},"task":{"type":"worker","index":0}})"});
  ASSERT_TRUE(chief.ok()) << chief.status();
  auto other = testing_util::WorkerProcess::Start(
      {bin, "--device", "cpu", "--model", "mlp", "--max-steps", "1"},
      {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t",
       R"(TF_CONFIG={"cluster":{"worker":[)" + two + R"(,")" + p2->address() +
           R"("]},"task":{"type":"worker","index":1}})"});
  ASSERT_TRUE(other.ok()) << other.status();
  auto chief_exit = (*chief)->WaitExit(60s);
  ASSERT_TRUE(chief_exit.has_value()) << (*chief)->output();
  EXPECT_EQ(chief_exit->exit_code, kExitUsage) << (*chief)->output();
  EXPECT_NE((*chief)->output().find("was started with another cluster than the chief's"), std::string::npos)
      << (*chief)->output();
  EXPECT_EQ((*chief)->output().find("serving this error"), std::string::npos) << (*chief)->output();
  auto other_exit = (*other)->WaitExit(60s);
  ASSERT_TRUE(other_exit.has_value()) << (*other)->output();
}

// The same failure while a task of the chief's cluster has not started yet:
// the chief keeps its service answering, so that task, started after the
// chief said its error, stops at once naming it (exit 2, a configuration
// error like the others'), instead of waiting out its registration timeout
// (300 s here) for a chief gone, and being restarted by its launcher.
TEST(DeviceChoiceWorkerTest, AChiefFailingAfterItsServiceRanTellsATaskStartedLater) {
  const std::string bin = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  auto p2 = PortReservation::Reserve();
  ASSERT_TRUE(p0.ok() && p1.ok() && p2.ok());
  const std::string two = R"(")" + p0->address() + R"(",")" + p1->address() + R"(")";
  const std::string three = two + R"(,")" + p2->address() + R"(")";
  auto tf_config = [](const std::string& workers, int index) {
    return R"(TF_CONFIG={"cluster":{"worker":[)" + workers + R"(]},"task":{"type":"worker","index":)" +
           std::to_string(index) + "}}";
  };
  auto start = [&](const std::string& workers, int index) {
    return testing_util::WorkerProcess::Start({bin, "--device", "cpu", "--model", "mlp", "--max-steps", "1"},
                                              {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", tf_config(workers, index)});
  };
  auto chief = start(three, 0);
  ASSERT_TRUE(chief.ok()) << chief.status();
  auto other = start(two, 1);
  ASSERT_TRUE(other.ok()) << other.status();
  const std::string error = "task worker:1 was started with another cluster than the chief's";
  ASSERT_TRUE((*chief)->WaitForOutput(error, 60s)) << (*chief)->output();
  auto late = start(three, 2);
  ASSERT_TRUE(late.ok()) << late.status();
  auto late_exit = (*late)->WaitExit(30s);
  ASSERT_TRUE(late_exit.has_value()) << "the task started late still waits:\n" << (*late)->output();
  EXPECT_EQ(late_exit->exit_code, kExitUsage) << (*late)->output();
  EXPECT_NE((*late)->output().find(error), std::string::npos) << (*late)->output();
  auto chief_exit = (*chief)->WaitExit(30s);
  ASSERT_TRUE(chief_exit.has_value()) << (*chief)->output();
  EXPECT_EQ(chief_exit->exit_code, kExitUsage) << (*chief)->output();
  EXPECT_NE((*chief)->output().find("serving this error at"), std::string::npos) << (*chief)->output();
  EXPECT_EQ((*chief)->output().find("no word from"), std::string::npos)
      << "every task heard it before the serve window ended:\n" << (*chief)->output();
  auto other_exit = (*other)->WaitExit(30s);
  ASSERT_TRUE(other_exit.has_value()) << (*other)->output();
  EXPECT_EQ(other_exit->exit_code, kExitUsage) << (*other)->output();
}

TEST(DeviceChoiceWorkerTest, DeviceAutoWithoutAGpuTrainsOnCpuReplicas) {
  SKIP_WITH_A_GPU();
  auto w = testing_util::WorkerProcess::Start(
      {std::string(MIRRORED_BIN_DIR) + "/mirrored-worker", "--device", "auto", "--cpu-replicas", "2", "--model", "mlp",
       "--max-steps", "4", "--log-every", "2", "--no-validate"},
      {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(w.ok()) << w.status();
  auto exit = (*w)->WaitExit(120s);
  ASSERT_TRUE(exit.has_value()) << (*w)->output();
  EXPECT_EQ(exit->exit_code, 0) << (*w)->output();
  EXPECT_NE((*w)->output().find("worker:0 runs 2 CPU replicas"), std::string::npos) << (*w)->output();
  EXPECT_NE((*w)->output().find("done: 4 steps"), std::string::npos) << (*w)->output();
}

}  // namespace
}  // namespace mirrored
