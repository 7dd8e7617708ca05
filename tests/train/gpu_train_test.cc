// GPU replicas end to end (label `gpu`; every test skips without a CUDA
// device). One process, one GPU: loss goes down, the weights after N SGD
// steps match the CPU path's within float32 tolerance, the final checkpoint
// holds exactly the trained weights. Two mirrored-worker processes on ONE
// GPU (distinct NCCL_HOSTID, so NCCL treats them as two hosts and connects
// them over loopback sockets): identical final weights on both, equal to one
// replica on the global batch; a killed peer makes the other exit 3.
//
// Data: MIRRORED_DATA_DIR, else the Debian Fashion-MNIST location. On a host
// with a GPU but without the data the tests FAIL (saying so) rather than skip.
// mirrored-worker: MIRRORED_BIN_DIR, else the build tree's bin/.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/cluster/tf_config_parser.h"
#include "common/run_dir/checkpoint_reader.h"
#include "common/run_dir/file_env.h"
#include "launcher/job/port_reservation.h"
#include "tests/train/gpu_train_fixture.h"
#include "tests/util/gpu_test_util.h"
#include "tests/util/process_test_util.h"
#include "tests/util/worker_process.h"
#include "worker/data/fashion_mnist.h"
#include "worker/model/model.h"
#include "worker/strategy/device_choice.h"
#include "worker/checkpoint/model_checkpoint.h"
#include "worker/train/trainer.h"

extern char** environ;

namespace mirrored {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing_util::WorkerProcess;

// The built binaries; MIRRORED_BIN_DIR overrides the build tree's for a
// packed copy run on another machine (bench/gpu/pack.sh).
std::string BinDir() {
  const char* dir = std::getenv("MIRRORED_BIN_DIR");
  return dir != nullptr ? dir : MIRRORED_BIN_DIR;
}

TrainerOptions SgdOptions(const std::string& model, int64_t steps, int64_t batch_per_replica) {
  TrainerOptions o;
  o.model.name = model;
  o.data.dir = DataDir();
  o.optimizer.name = "sgd";
  o.steps.max_steps = steps;
  o.steps.batch_per_replica = batch_per_replica;
  o.validation.test_set = false;
  o.validation.replicas = true;
  o.steps.log_every = 5;
  o.seed = 7;
  return o;
}

StatusOr<TrainSummary> TrainInProcess(DeviceKind device, const TrainerOptions& o) {
  StrategyOptions so;
  so.device = device;
  so.cpu_replicas = 1;
  MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(SingleLocalTaskConfig("test"), so));
  if ((device == DeviceKind::kGpu) != strategy->on_gpu()) return InternalError("wrong replica device");
  return Train(o, *strategy);
}

// sqrt(sum (a-b)^2 / sum a^2), printed with the worst element.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  if (a.size() != b.size() || a.empty()) return 1e9;
  double diff = 0, norm = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double(a[i]) - double(b[i]));
    diff += d * d;
    norm += double(a[i]) * double(a[i]);
    worst = std::max(worst, d);
  }
  const double rel = std::sqrt(diff / norm);
  std::printf("%s: %zu weights, relative L2 error %.3g, max abs diff %.3g\n", what.c_str(), a.size(), rel, worst);
  ::testing::Test::RecordProperty(what, std::to_string(rel));
  return rel;
}

// The final checkpoint's weights, restored into a CPU model (host floats,
// the ParameterStore layout of TrainSummary::params).
StatusOr<std::vector<float>> CheckpointWeights(const fs::path& run_dir, const std::string& model_name,
                                               int64_t expect_step) {
  CheckpointReader reader(FileEnv::Default(), run_dir.string());
  MIRRORED_ASSIGN_OR_RETURN(LoadedCheckpoint ckpt, reader.LoadLatest());
  if (ckpt.info.step != expect_step || !ckpt.info.state.final) {
    return InternalError("latest checkpoint " + ckpt.info.dir + " is not the final one of step " +
                         std::to_string(expect_step));
  }
  MIRRORED_ASSIGN_OR_RETURN(auto model, model::Model::Create(model_name, model::MakeCpuBackend(), 1));
  MIRRORED_RETURN_IF_ERROR(RestoreModel(ckpt, *model, nullptr));
  return model->store().DownloadParams();
}

std::vector<double> TrainLosses(const fs::path& run_dir) {
  std::vector<double> losses;
  std::istringstream in(testing_util::ReadWholeFile(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("kind", "") == "train") losses.push_back(j.value("loss", 0.0));
  }
  return losses;
}

class GpuMatchesCpuTest : public GpuTrainTest, public ::testing::WithParamInterface<std::string> {};

// ||gpu - cpu|| / ||cpu - w0||: how far the GPU's training moved the weights
// away from where the CPU's moved them, relative to how far they moved.
double RelativeUpdateError(const std::vector<float>& w0, const std::vector<float>& cpu, const std::vector<float>& gpu,
                           const std::string& what) {
  if (w0.size() != cpu.size() || cpu.size() != gpu.size()) return 1e9;
  double diff = 0, moved = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    diff += (double(gpu[i]) - cpu[i]) * (double(gpu[i]) - cpu[i]);
    moved += (double(cpu[i]) - w0[i]) * (double(cpu[i]) - w0[i]);
  }
  const double rel = moved > 0 ? std::sqrt(diff / moved) : 1e9;
  std::printf("%s: update relative L2 error %.3g\n", what.c_str(), rel);
  return rel;
}

TEST_P(GpuMatchesCpuTest, LossFallsAndWeightsMatchTheCpuPathAfterSgdSteps) {
  const std::string model = GetParam();
  auto initial = model::Model::Create(model, model::MakeCpuBackend(), SgdOptions(model, 1, 32).seed);
  ASSERT_TRUE(initial.ok()) << initial.status();
  const std::vector<float> w0 = (*initial)->store().DownloadParams();

  // One step: the same gradients within float32 tolerance, so the same update.
  {
    auto gpu = TrainInProcess(DeviceKind::kGpu, SgdOptions(model, 1, 32));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto cpu = TrainInProcess(DeviceKind::kCpu, SgdOptions(model, 1, 32));
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_LE(RelativeUpdateError(w0, cpu->params, gpu->params, model + " 1 step"), 1e-4);
  }

  const int64_t steps = 40;
  TrainerOptions gpu_options = SgdOptions(model, steps, 32);
  gpu_options.checkpoints.run_dir = (run_root_ / "gpu").string();  // checkpoints and metrics from device buffers
  gpu_options.validation.test_set = true;                          // inference only: changes no weight
  auto gpu = TrainInProcess(DeviceKind::kGpu, gpu_options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = TrainInProcess(DeviceKind::kCpu, SgdOptions(model, steps, 32));
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  EXPECT_EQ(gpu->steps, steps);
  EXPECT_TRUE(gpu->replicas_identical);
  // Over 40 steps the float noise of different kernels (cuDNN's convolution
  // algorithms sum in another order; a max-pool window whose two largest
  // inputs are nearly equal can pick the other one) grows: a bound on the
  // weights, and a looser one on the update, still far below what a wrong
  // batch, scale or step would give (the update would be off by O(1)).
  EXPECT_LE(RelativeError(cpu->params, gpu->params, model + " cpu vs gpu"), 2e-3);
  EXPECT_LE(RelativeUpdateError(w0, cpu->params, gpu->params, model + " 40 steps"), 5e-2);

  const std::vector<double> losses = TrainLosses(gpu_options.checkpoints.run_dir);
  ASSERT_GE(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front()) << model << ": train loss did not fall";
  EXPECT_GT(gpu->val_accuracy, 0.2) << "validation on the GPU (10 classes: chance is 0.1)";
  EXPECT_LE(gpu->val_accuracy, 1.0);

  auto saved = CheckpointWeights(gpu_options.checkpoints.run_dir, model, steps);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, gpu->params) << "the checkpoint must hold the device weights, bit for bit";
}

INSTANTIATE_TEST_SUITE_P(Models, GpuMatchesCpuTest, ::testing::Values("mlp", "cnn"));

// ---- Two processes on one GPU ---------------------------------------------

// This process's environment without the variables each worker gets from us.
std::vector<std::string> WorkerEnvironment(int index, const std::string& cluster) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("TF_CONFIG=", 0) == 0 || entry.rfind("MIRRORED_", 0) == 0 || entry.rfind("NCCL_HOSTID=", 0) == 0)
      continue;
    env.push_back(entry);
  }
  env.push_back("MIRRORED_JOB_TOKEN=gpu-test");
  env.push_back("TF_CONFIG={\"cluster\":{\"worker\":[" + cluster + "]},\"task\":{\"type\":\"worker\",\"index\":" +
                std::to_string(index) + "}}");
  // Two "hosts" for NCCL, so both ranks may use GPU 0; sockets over loopback.
  env.push_back("NCCL_HOSTID=mirrored-gpu-test-host-" + std::to_string(index));
  if (std::getenv("NCCL_SOCKET_IFNAME") == nullptr) env.push_back("NCCL_SOCKET_IFNAME=lo");
  if (std::getenv("NCCL_IB_DISABLE") == nullptr) env.push_back("NCCL_IB_DISABLE=1");
  return env;
}

std::vector<std::unique_ptr<WorkerProcess>> StartGpuWorkers(const std::vector<std::string>& args) {
  // Held until the test process ends, not just until this returns: the
  // chief binds its port later, and a port let go before that can be taken
  // by a concurrent test's connection (a flaky "Address already in use").
  static std::vector<PortReservation> held;
  std::vector<PortReservation> ports;
  std::string cluster;
  for (int i = 0; i < 2; ++i) {
    ports.push_back(std::move(PortReservation::Reserve()).value());
    cluster += (i ? ",\"" : "\"") + ports.back().address() + "\"";
  }
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv = {BinDir() + "/mirrored-worker", "--device", "gpu",
                                     "--data", DataDir()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto w = WorkerProcess::Start(argv, WorkerEnvironment(i, cluster));
    EXPECT_TRUE(w.ok()) << w.status();
    if (w.ok()) workers.push_back(std::move(w).value());
  }
  for (auto& p : ports) held.push_back(std::move(p));
  return workers;
}

std::string Fingerprint(const std::string& output) {
  std::smatch m;
  static const std::regex kLine("weights fingerprint ([0-9a-f]{6})");
  return std::regex_search(output, m, kLine) ? m[1].str() : "";
}

TEST_F(GpuTrainTest, TwoProcessesOnOneGpuEndIdenticalAndEqualToOneReplicaOnTheGlobalBatch) {
  const int64_t steps = 20;
  const fs::path run = run_root_ / "two";
  auto workers = StartGpuWorkers({"--model", "cnn", "--optimizer", "sgd", "--seed", "7", "--max-steps",
                                  std::to_string(steps), "--batch-per-replica", "32", "--verify-replicas",
                                  "--log-every", "5", "--run-dir", run.string(), "--registration-timeout", "120",
                                  "--collective-timeout", "120"});
  ASSERT_EQ(workers.size(), 2u);
  for (size_t i = 0; i < workers.size(); ++i) {
    auto exit = workers[i]->WaitExit(300s);
    ASSERT_TRUE(exit.has_value()) << "worker:" << i << " still runs:\n" << workers[i]->output();
    EXPECT_TRUE(exit->success()) << "worker:" << i << " " << exit->ToString() << "\n" << workers[i]->output();
  }
  EXPECT_NE(workers[0]->output().find("worker:0 runs 1 GPU replica (GPU 0) (global ranks 0-0)"), std::string::npos)
      << workers[0]->output();
  EXPECT_NE(workers[0]->output().find("replicas identical: yes"), std::string::npos) << workers[0]->output();
  const std::string fp0 = Fingerprint(workers[0]->output()), fp1 = Fingerprint(workers[1]->output());
  EXPECT_FALSE(fp0.empty()) << workers[0]->output();
  EXPECT_EQ(fp0, fp1) << "the two processes' final weights differ";

  // The same update as one replica on the global batch (DATA sharding; SUM
  // of gradients scaled by 1 / global batch). Only the order of float sums
  // differs, and a bucket reduced before backward wrote it would not.
  auto saved = CheckpointWeights(run, "cnn", steps);
  ASSERT_TRUE(saved.ok()) << saved.status();
  TrainerOptions alone = SgdOptions("cnn", steps, 64);
  auto one = TrainInProcess(DeviceKind::kGpu, alone);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_LE(RelativeError(one->params, *saved, "cnn 1 GPU x 64 vs 2 processes x 32"), 1e-4);
}

TEST_F(GpuTrainTest, KilledPeerAbortsTheNcclCommunicatorAndTheOtherExitsThree) {
  auto workers = StartGpuWorkers({"--model", "mlp", "--epochs", "50", "--log-every", "5", "--no-validate",
                                  "--heartbeat-interval", "0.2", "--heartbeat-timeout", "1",
                                  "--registration-timeout", "120"});
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_TRUE(workers[0]->WaitForOutput("step 10/", 180s)) << workers[0]->output();
  workers[1]->child().SignalGroup(SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  auto exit = workers[0]->WaitExit(30s);
  ASSERT_TRUE(exit.has_value()) << "worker:0 still runs after its peer was killed:\n" << workers[0]->output();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("worker:0 exited %s %lld ms after worker:1 was killed\n", exit->ToString().c_str(),
              static_cast<long long>(took.count()));
  EXPECT_EQ(exit->exit_code, kExitPeerFailed) << exit->ToString() << "\n" << workers[0]->output();
  EXPECT_NE(workers[0]->output().find("worker:1"), std::string::npos) << workers[0]->output();
  EXPECT_LE(took, 10s) << "heartbeat timeout 1 s; NCCL abort should follow at once";
}

// The evaluator with --device gpu evaluates a checkpoint (written by CPU
// training) to the CPU evaluator's loss and accuracy, within float32
// tolerance.
TEST_F(GpuTrainTest, EvaluatorOnTheGpuMatchesTheCpuEvaluator) {
  std::vector<std::string> env = WorkerEnvironment(0, "\"127.0.0.1:1\"");
  env.erase(std::remove_if(env.begin(), env.end(), [](const std::string& e) { return e.rfind("TF_CONFIG=", 0) == 0; }),
            env.end());
  const fs::path run = run_root_ / "trained";
  auto train = WorkerProcess::Start({BinDir() + "/mirrored-worker", "--device", "cpu", "--model", "cnn", "--max-steps",
                                     "30", "--no-validate", "--data", DataDir(), "--run-dir", run.string()},
                                    env);
  ASSERT_TRUE(train.ok()) << train.status();
  auto trained = (*train)->WaitExit(120s);
  ASSERT_TRUE(trained && trained->success()) << (*train)->output();

  env.push_back(R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})");
  auto evaluate = [&](const std::string& device, double* loss, double* accuracy) {
    const fs::path copy = run_root_ / ("eval-" + device);
    fs::copy(run, copy, fs::copy_options::recursive);
    auto eval = WorkerProcess::Start({BinDir() + "/mirrored-worker", "--device", device, "--data", DataDir(),
                                      "--run-dir", copy.string()},
                                     env);
    ASSERT_TRUE(eval.ok()) << eval.status();
    auto done = (*eval)->WaitExit(120s);
    ASSERT_TRUE(done && done->success()) << (*eval)->output();
    std::smatch m;
    const std::string out = (*eval)->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("final checkpoint ckpt-30: loss ([0-9.]+) accuracy ([0-9.]+)")))
        << out;
    EXPECT_NE(out.find(device == "gpu" ? "evaluating on GPU 0" : "evaluating on the CPU"), std::string::npos) << out;
    *loss = std::stod(m[1].str());
    *accuracy = std::stod(m[2].str());
  };
  double gpu_loss = 0, gpu_acc = 0, cpu_loss = 0, cpu_acc = 0;
  ASSERT_NO_FATAL_FAILURE(evaluate("gpu", &gpu_loss, &gpu_acc));
  ASSERT_NO_FATAL_FAILURE(evaluate("cpu", &cpu_loss, &cpu_acc));
  std::printf("evaluator: GPU loss %.6f accuracy %.4f, CPU loss %.6f accuracy %.4f\n", gpu_loss, gpu_acc, cpu_loss,
              cpu_acc);
  EXPECT_NEAR(gpu_loss, cpu_loss, 2e-4 * std::max(1.0, cpu_loss));
  EXPECT_NEAR(gpu_acc, cpu_acc, 3e-4);  // printed to 4 places; a few of 10,000 examples at a tie may flip
}

}  // namespace
}  // namespace mirrored
