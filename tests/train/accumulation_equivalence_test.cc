// Gradient accumulation (--accumulate-steps K) is the large-batch update:
// 10 optimizer steps of 2 workers x 2 CPU replicas x K = 2 micro-batches of
// B give the same weights as 1 replica with batch 8B, and so do 1 replica
// with K = 4 micro-batches of 2B and with K = 2 of 4B (relative error
// <= 1e-5), under a learning-rate
// schedule with warm-up; replicas stay bit-identical after every step. As in
// train_equivalence_test.cc, the two workers are threads of this process,
// each a real task (tests/util/equivalence_test_util.h).
#include <gtest/gtest.h>

#include "tests/util/equivalence_test_util.h"
#include "worker/train/trainer.h"

namespace mirrored {
namespace {

// Every run trains exactly this many optimizer steps.
constexpr int64_t kSteps = 10;

TrainerOptions Options(const std::string& model, int64_t batch_per_replica, int64_t accumulate_steps) {
  TrainerOptions o = testing_util::EquivalenceOptions(batch_per_replica);
  o.model.name = model;
  o.steps.max_steps = kSteps;
  o.steps.accumulate_steps = accumulate_steps;
  o.schedule.kind = "cosine";  // over the 10 steps, after 3 of warm-up
  o.schedule.warmup_steps = 3;
  return o;
}

std::vector<float> TrainAlone(const TrainerOptions& options) { return testing_util::TrainAlone(options, kSteps); }

std::vector<float> TrainTwoWorkersTwoReplicas(const TrainerOptions& options) {
  return testing_util::TrainTwoWorkersTwoReplicas(options, kSteps);
}

// Global batch 64 per optimizer step, every way.
void ExpectAccumulationIsTheLargeBatch(const std::string& model) {
  const std::vector<float> large = TrainAlone(Options(model, 64, 1));
  testing_util::ExpectSameWeights(model + ", 2 workers x 2 replicas x 2 micro-batches of 8 vs 1 replica x 64", large,
                                  TrainTwoWorkersTwoReplicas(Options(model, 8, 2)));
  testing_util::ExpectSameWeights(model + ", 1 replica x 4 micro-batches of 16 vs 1 replica x 64", large,
                                  TrainAlone(Options(model, 16, 4)));
  testing_util::ExpectSameWeights(model + ", 1 replica x 2 micro-batches of 32 vs 1 replica x 64", large,
                                  TrainAlone(Options(model, 32, 2)));
}

TEST(AccumulationEquivalenceTest, MlpAccumulatedMicroBatchesEqualOneLargeBatch) {
  ExpectAccumulationIsTheLargeBatch("mlp");
}
TEST(AccumulationEquivalenceTest, CnnAccumulatedMicroBatchesEqualOneLargeBatch) {
  ExpectAccumulationIsTheLargeBatch("cnn");
}

}  // namespace
}  // namespace mirrored
