// What the equivalence tests share (DESIGN.md, "Training semantics"): the
// same steps trained by one CPU replica alone, and by 2 workers x 2 CPU
// replicas, each worker a real task run as a thread of this process (gRPC
// coordination on loopback, Gloo between the workers, shared memory between
// their replicas); then the two sets of weights compared.
//
//   TrainerOptions o = EquivalenceOptions(/*batch_per_replica=*/64);
//   std::vector<float> alone = TrainAlone(o);
//   o.steps.batch_per_replica = 16;
//   ExpectSameWeights("mlp", alone, TrainTwoWorkersTwoReplicas(o));
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster/tf_config_parser.h"
#include "launcher/job/port_reservation.h"
#include "worker/train/trainer.h"

namespace mirrored::testing_util {

// 10 steps at most, no validation, replicas compared after every step, seed 7.
inline TrainerOptions EquivalenceOptions(int64_t batch_per_replica) {
  TrainerOptions o;
  o.steps.max_steps = 10;
  o.steps.batch_per_replica = batch_per_replica;
  o.validation.test_set = false;
  o.validation.replicas = true;
  o.steps.log_every = 1000;
  o.seed = 7;
  return o;
}

// The weights of one task's `cpu_replicas` CPU replicas (1: one replica
// trained alone) (empty when it failed, which the test is told).
// `expected_steps` >= 0: the steps it must have trained.
inline std::vector<float> TrainAlone(const TrainerOptions& options, int64_t expected_steps = -1,
                                     int cpu_replicas = 1) {
  StrategyOptions so;
  so.cpu_replicas = cpu_replicas;
  auto strategy = MirroredStrategy::Create(SingleLocalTaskConfig("test"), so);
  EXPECT_TRUE(strategy.ok()) << strategy.status();
  if (!strategy.ok()) return {};
  auto summary = Train(options, **strategy);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (!summary.ok()) return {};
  if (expected_steps >= 0) {
    EXPECT_EQ(summary->steps, expected_steps);
  }
  return summary->params;
}

// Task `index` of the two workers at `addresses`, with `cpu_replicas` CPU
// replicas; the chief's weights into `chief_params`.
inline Status TrainWorkerTask(const TrainerOptions& options, const std::string& addresses, int index,
                              int64_t expected_steps, std::vector<float>* chief_params, int cpu_replicas) {
  MIRRORED_ASSIGN_OR_RETURN(ClusterConfig config,
                            ParseTfConfig(R"({"cluster":{"worker":[)" + addresses +
                                          R"(]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}"));
  StrategyOptions so;
  so.cpu_replicas = cpu_replicas;
  so.job_token = "equivalence";
  so.collective_timeout = std::chrono::seconds(60);
  so.registration_timeout = std::chrono::seconds(30);
  MIRRORED_ASSIGN_OR_RETURN(auto strategy, MirroredStrategy::Create(config, so));
  MIRRORED_ASSIGN_OR_RETURN(TrainSummary summary, Train(options, *strategy));
  if (!summary.replicas_identical) return InternalError("replicas differ");
  if (expected_steps >= 0 && summary.steps != expected_steps) {
    return InternalError("trained " + std::to_string(summary.steps) + " steps, not " + std::to_string(expected_steps));
  }
  if (index == 0) *chief_params = summary.params;
  return strategy->Shutdown();
}

// The chief's weights after 2 workers x `cpu_replicas` CPU replicas trained
// together (`expected_steps` as TrainAlone's).
inline std::vector<float> TrainTwoWorkers(const TrainerOptions& options, int cpu_replicas,
                                          int64_t expected_steps = -1) {
  auto p0 = PortReservation::Reserve();
  auto p1 = PortReservation::Reserve();
  const std::string addresses = "\"" + p0->address() + "\",\"" + p1->address() + "\"";
  std::vector<float> chief_params;
  std::vector<Status> results(2);
  std::vector<std::thread> tasks;
  for (int index = 0; index < 2; ++index) {
    tasks.emplace_back([&, index] { results[index] = TrainWorkerTask(options, addresses, index, expected_steps, &chief_params, cpu_replicas);
    });
  }
  for (auto& t : tasks) t.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  return chief_params;
}

inline std::vector<float> TrainTwoWorkersTwoReplicas(const TrainerOptions& options, int64_t expected_steps = -1) {
  return TrainTwoWorkers(options, 2, expected_steps);
}

// ||mirrored - alone|| / ||alone||, the L2 norms over every weight.
inline double RelativeError(const std::vector<float>& alone, const std::vector<float>& mirrored) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < alone.size() && i < mirrored.size(); ++i) {
    const double d = double(alone[i]) - double(mirrored[i]);
    diff += d * d;
    norm += double(alone[i]) * double(alone[i]);
  }
  return std::sqrt(diff / norm);
}

// The relative L2 error of `mirrored` against `alone` at most `tolerance`
// (1e-5: the same up to FP32 summation order); printed with the largest
// difference, and recorded as the test's relative_error.
inline void ExpectSameWeights(const std::string& what, const std::vector<float>& alone,
                              const std::vector<float>& mirrored, double tolerance = 1e-5) {
  ASSERT_EQ(alone.size(), mirrored.size()) << what;
  ASSERT_FALSE(alone.empty()) << what;
  double worst = 0;
  for (size_t i = 0; i < alone.size(); ++i) worst = std::max(worst, std::abs(double(alone[i]) - double(mirrored[i])));
  const double relative = RelativeError(alone, mirrored);
  ::testing::Test::RecordProperty("relative_error", std::to_string(relative));
  std::printf("%s: %zu weights, relative L2 error %.3g, max abs diff %.3g\n", what.c_str(), alone.size(), relative,
              worst);
  EXPECT_LE(relative, tolerance) << what;
}

}  // namespace mirrored::testing_util
