// Equivalence (DESIGN.md, "Training semantics"): 10 steps with 1 replica
// and global batch G give the same weights as 2 workers x 2 CPU replicas with
// per-replica batch G/4 (relative error <= 1e-5), and replicas stay
// bit-identical after every step. The two workers run as threads of this
// process, each a real task: coordination service over gRPC on loopback,
// Gloo between the workers, shared memory between their replicas
// (tests/util/equivalence_test_util.h).
#include <gtest/gtest.h>

#include "tests/util/equivalence_test_util.h"

namespace mirrored {
namespace {

using testing_util::EquivalenceOptions;

void ExpectEquivalent(const std::string& model) {
  const int64_t global_batch = 64;
  TrainerOptions alone = EquivalenceOptions(global_batch);
  alone.model.name = model;
  TrainerOptions mirrored = EquivalenceOptions(global_batch / 4);
  mirrored.model.name = model;
  testing_util::ExpectSameWeights(model, testing_util::TrainAlone(alone, alone.steps.max_steps),
                                  testing_util::TrainTwoWorkersTwoReplicas(mirrored, alone.steps.max_steps));
}

TEST(TrainEquivalenceTest, MlpOneReplicaEqualsTwoWorkersTimesTwoReplicas) { ExpectEquivalent("mlp"); }
TEST(TrainEquivalenceTest, CnnOneReplicaEqualsTwoWorkersTimesTwoReplicas) { ExpectEquivalent("cnn"); }

}  // namespace
}  // namespace mirrored
