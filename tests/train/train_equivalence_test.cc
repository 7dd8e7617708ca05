// Equivalence (DESIGN.md, "Training semantics"): 10 steps with 1 replica
// and global batch G give the same weights as 2 workers x 2 CPU replicas with
// per-replica batch G/4 (relative error <= 1e-5), and replicas stay
// bit-identical after every step. The two workers run as threads of this
// process, each a real task: coordination service over gRPC on loopback,
// Gloo between the workers, shared memory between their replicas.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "common/cluster/tf_config_parser.h"
#include "launcher/job/port_reservation.h"
#include "worker/train/trainer.h"

namespace mirrored {
namespace {

TrainerOptions Options(const std::string& model, int64_t batch_per_replica) {
  TrainerOptions o;
  o.model.name = model;
  o.steps.max_steps = 10;
  o.steps.batch_per_replica = batch_per_replica;
  o.validation.test_set = false;
  o.validation.replicas = true;
  o.steps.log_every = 1000;
  o.seed = 7;
  return o;
}

std::vector<float> TrainAlone(const std::string& model, int64_t global_batch) {
  StrategyOptions so;
  so.cpu_replicas = 1;
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), so);
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  auto summary = Train(Options(model, global_batch), **strategy);
  EXPECT_TRUE(summary.ok()) << summary.status();
  return summary.ok() ? summary->params : std::vector<float>{};
}

std::vector<float> TrainTwoWorkersTwoReplicas(const std::string& model, int64_t global_batch) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  std::vector<float> chief_params;
  std::vector<std::thread> tasks;
  std::vector<Status> results(2);
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] {
      auto config = ParseTfConfig(R"({"cluster":{"worker":[")" + p0->address() + R"(",")" + p1->address() +
                                  R"("]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}");
      if (!config.ok()) {
        results[index] = config.status();
        return;
      }
      StrategyOptions so;
      so.cpu_replicas = 2;
      so.job_token = "equivalence";
      so.collective_timeout = std::chrono::seconds(60);
      so.registration_timeout = std::chrono::seconds(30);
      auto strategy = MirroredStrategy::Create(*config, so);
      if (!strategy.ok()) {
        results[index] = strategy.status();
        return;
      }
      auto summary = Train(Options(model, global_batch / 4), **strategy);
      if (!summary.ok()) {
        results[index] = summary.status();
        return;
      }
      if (!summary->replicas_identical) results[index] = InternalError("replicas differ");
      if (index == 0) chief_params = summary->params;
      results[index] = (*strategy)->Shutdown();
    });
  }
  for (auto& t : tasks) t.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  return chief_params;
}

void ExpectEquivalent(const std::string& model) {
  const int64_t global_batch = 64;
  std::vector<float> alone = TrainAlone(model, global_batch);
  std::vector<float> mirrored = TrainTwoWorkersTwoReplicas(model, global_batch);
  ASSERT_EQ(alone.size(), mirrored.size());
  ASSERT_FALSE(alone.empty());
  double diff = 0, norm = 0, worst = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    double d = std::abs(double(alone[i]) - double(mirrored[i]));
    diff += d * d;
    norm += double(alone[i]) * double(alone[i]);
    worst = std::max(worst, d);
  }
  const double relative = std::sqrt(diff / norm);
  ::testing::Test::RecordProperty("relative_error", std::to_string(relative));
  std::printf("%s: %zu weights, relative L2 error %.3g, max abs diff %.3g\n", model.c_str(), alone.size(), relative, worst);
  EXPECT_LE(relative, 1e-5);
}

TEST(TrainEquivalenceTest, MlpOneReplicaEqualsTwoWorkersTimesTwoReplicas) { ExpectEquivalent("mlp"); }
TEST(TrainEquivalenceTest, CnnOneReplicaEqualsTwoWorkersTimesTwoReplicas) { ExpectEquivalent("cnn"); }

}  // namespace
}  // namespace mirrored
