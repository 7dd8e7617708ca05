// Equivalence for a --model-json model (DESIGN.md, "Training semantics"): a
// CIFAR-shaped (32x32x3, 7 classes) residual CNN saved by Keras 3, with
// Rescaling, Add, AveragePooling2D and Dropout, trained 10 steps on 1
// replica with global batch G gives the weights of 2 workers x 2 CPU
// replicas with batch G/4 each (relative error <= 1e-5), as
// train_equivalence_test does for the zoo: Dropout's masks follow the
// example, not the replica. The workers are threads of this process, each a
// real task (gRPC coordination on loopback, Gloo, shared memory).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/data/npy_test_util.h"
#include "tests/util/equivalence_test_util.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGlobalBatch = 64;
constexpr int64_t kTrainExamples = 320;
// One epoch of the data ends the training before EquivalenceOptions' 10 steps.
constexpr int64_t kSteps = kTrainExamples / kGlobalBatch;

class KerasJsonEquivalenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("keras_json_equivalence_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    data::SyntheticSplit train = data::Synthetic(kTrainExamples, 32, 32, 3, 7), test = data::Synthetic(16, 32, 32, 3, 7, 1);
    npz_ = dir_ / "cifar_like.npz";
    data::WriteSplitsNpz(npz_, train, test);
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainerOptions Options(int64_t batch_per_replica) const {
    TrainerOptions o = testing_util::EquivalenceOptions(batch_per_replica);
    o.model.keras_json = std::string(MIRRORED_SOURCE_DIR) + "/tests/model/keras/keras3_residual_no_bn.json";
    o.data.dir = npz_.string();
    return o;
  }

  fs::path dir_, npz_;
};

TEST_F(KerasJsonEquivalenceTest, ResidualCnnOneReplicaEqualsTwoWorkersTimesTwoReplicas) {
  testing_util::ExpectSameWeights("keras3_residual_no_bn", testing_util::TrainAlone(Options(kGlobalBatch), kSteps),
                                  testing_util::TrainTwoWorkersTwoReplicas(Options(kGlobalBatch / 4), kSteps));
}

}  // namespace
}  // namespace mirrored
