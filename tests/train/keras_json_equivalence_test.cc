// Equivalence for a --model-json model (DESIGN.md, "Training semantics"): a
// CIFAR-shaped (32x32x3, 7 classes) residual CNN saved by Keras 3, with
// Rescaling, Add, AveragePooling2D and Dropout, trained 10 steps on 1
// replica with global batch G gives the weights of 2 workers x 2 CPU
// replicas with batch G/4 each (relative error <= 1e-5), as
// train_equivalence_test does for the zoo: Dropout's masks follow the
// example, not the replica. The workers are threads of this process, each a
// real task (gRPC coordination on loopback, Gloo, shared memory).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "common/cluster/tf_config_parser.h"
#include "launcher/job/port_reservation.h"
#include "tests/data/npy_test_util.h"
#include "worker/train/trainer.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGlobalBatch = 64;

class KerasJsonEquivalenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("keras_json_equivalence_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    data::SyntheticSplit train = data::Synthetic(320, 32, 32, 3, 7), test = data::Synthetic(16, 32, 32, 3, 7, 1);
    npz_ = dir_ / "cifar_like.npz";
    data::WriteBytes(npz_, data::Zip({{"x_train.npy", train.x},
                                      {"y_train.npy", train.y},
                                      {"x_test.npy", test.x},
                                      {"y_test.npy", test.y}}));
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainerOptions Options(int64_t batch_per_replica) const {
    TrainerOptions o;
    o.model.keras_json = std::string(MIRRORED_SOURCE_DIR) + "/tests/model/keras/keras3_residual_no_bn.json";
    o.data.dir = npz_.string();
    o.steps.max_steps = 10;
    o.steps.batch_per_replica = batch_per_replica;
    o.validation.test_set = false;
    o.validation.replicas = true;
    o.steps.log_every = 1000;
    o.seed = 7;
    return o;
  }

  std::vector<float> TrainAlone() {
    StrategyOptions so;
    so.cpu_replicas = 1;
    auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), so);
    EXPECT_TRUE(strategy.ok()) << strategy.status();
    auto summary = Train(Options(kGlobalBatch), **strategy);
    EXPECT_TRUE(summary.ok()) << summary.status();
    return summary.ok() ? summary->params : std::vector<float>{};
  }

  std::vector<float> TrainTwoWorkersTwoReplicas() {
    auto p0 = PortReservation::Reserve();
    auto p1 = PortReservation::Reserve();
    std::vector<float> chief_params;
    std::vector<std::thread> tasks;
    std::vector<Status> results(2);
    for (int index = 0; index < 2; ++index) {
      tasks.emplace_back([&, index] { results[index] = RunTask(index, p0->address(), p1->address(), &chief_params); });
    }
    for (auto& t : tasks) t.join();
    EXPECT_TRUE(results[0].ok()) << results[0];
    EXPECT_TRUE(results[1].ok()) << results[1];
    return chief_params;
  }

  Status RunTask(int index, const std::string& a0, const std::string& a1, std::vector<float>* chief_params) {
    MIRRORED_ASSIGN_OR_RETURN(auto config, ParseTfConfig(R"({"cluster":{"worker":[")" + a0 + R"(",")" + a1 +
                                                         R"("]},"task":{"type":"worker","index":)" +
                                                         std::to_string(index) + "}}"));
    StrategyOptions so;
    so.cpu_replicas = 2;
    so.job_token = "equivalence";
    so.collective_timeout = std::chrono::seconds(60);
    so.registration_timeout = std::chrono::seconds(30);
    MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(config, so));
    MIRRORED_ASSIGN_OR_RETURN(TrainSummary summary, Train(Options(kGlobalBatch / 4), *strategy));
    if (!summary.replicas_identical) return InternalError("replicas differ");
    if (index == 0) *chief_params = summary.params;
    return strategy->Shutdown();
  }

  fs::path dir_, npz_;
};

TEST_F(KerasJsonEquivalenceTest, ResidualCnnOneReplicaEqualsTwoWorkersTimesTwoReplicas) {
  std::vector<float> alone = TrainAlone();
  std::vector<float> mirrored = TrainTwoWorkersTwoReplicas();
  ASSERT_EQ(alone.size(), mirrored.size());
  ASSERT_FALSE(alone.empty());
  double diff = 0, norm = 0, worst = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    const double d = std::abs(double(alone[i]) - double(mirrored[i]));
    diff += d * d;
    norm += double(alone[i]) * double(alone[i]);
    worst = std::max(worst, d);
  }
  const double relative = std::sqrt(diff / norm);
  ::testing::Test::RecordProperty("relative_error", std::to_string(relative));
  std::printf("keras3_residual_no_bn: %zu weights, relative L2 error %.3g, max abs diff %.3g\n", alone.size(),
              relative, worst);
  EXPECT_LE(relative, 1e-5);
}

}  // namespace
}  // namespace mirrored
