// Gradient accumulation (--accumulate-steps K) is the large-batch update:
// 10 optimizer steps of 2 workers x 2 CPU replicas x K = 2 micro-batches of
// B give the same weights as 1 replica with batch 8B, and so do 1 replica
// with K = 4 micro-batches of 2B and with K = 2 of 4B (relative error
// <= 1e-5), under a learning-rate
// schedule with warm-up; replicas stay bit-identical after every step. As in
// train_equivalence_test.cc, the two workers are threads of this process,
// each a real task (gRPC coordination on loopback, Gloo between them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <thread>

#include "common/cluster/tf_config_parser.h"
#include "launcher/job/port_reservation.h"
#include "tests/util/equivalence_test_util.h"
#include "worker/train/trainer.h"

namespace mirrored {
namespace {

constexpr std::chrono::seconds kCollectiveTimeout{60};
constexpr std::chrono::seconds kRegistrationTimeout{30};

TrainerOptions Options(const std::string& model, int64_t batch_per_replica, int64_t accumulate_steps) {
  TrainerOptions o;
  o.model.name = model;
  o.steps.max_steps = 10;
  o.steps.batch_per_replica = batch_per_replica;
  o.steps.accumulate_steps = accumulate_steps;
  o.schedule.kind = "cosine";  // over the 10 steps, after 3 of warm-up
  o.schedule.warmup_steps = 3;
  o.validation.test_set = false;
  o.validation.replicas = true;
  o.steps.log_every = 1000;
  o.seed = 7;
  return o;
}

std::vector<float> TrainAlone(const TrainerOptions& options) {
  StrategyOptions so;
  so.cpu_replicas = 1;
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), so);
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  if (!strategy.ok()) return {};
  auto summary = Train(options, **strategy);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (!summary.ok()) return {};
  EXPECT_EQ(summary->steps, 10);
  return summary->params;
}

Status TrainOneTask(const TrainerOptions& options, const std::string& cluster, int index, std::vector<float>* params) {
  MIRRORED_ASSIGN_OR_RETURN(
      ClusterConfig config,
      ParseTfConfig(R"({"cluster":{"worker":[)" + cluster + R"(]},"task":{"type":"worker","index":)" +
                    std::to_string(index) + "}}"));
  StrategyOptions so;
  so.cpu_replicas = 2;
  so.job_token = "accumulation";
  so.collective_timeout = kCollectiveTimeout;
  so.registration_timeout = kRegistrationTimeout;
  MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(config, so));
  MIRRORED_ASSIGN_OR_RETURN(TrainSummary summary, Train(options, *strategy));
  if (!summary.replicas_identical) return InternalError("replicas differ");
  if (summary.steps != 10) return InternalError("trained " + std::to_string(summary.steps) + " steps, not 10");
  if (index == 0) *params = summary.params;
  return strategy->Shutdown();
}

std::vector<float> TrainTwoWorkersTwoReplicas(const TrainerOptions& options) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  const std::string cluster = "\"" + p0->address() + "\",\"" + p1->address() + "\"";
  std::vector<float> chief_params;
  std::vector<Status> results(2);
  std::vector<std::thread> tasks;
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] { results[index] = TrainOneTask(options, cluster, index, &chief_params); });
  }
  for (auto& t : tasks) t.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  return chief_params;
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
