// --allreduce-dtype bf16 / fp16 (DESIGN.md, "Training semantics"; the rule
// in worker/comm/wire_type.h): 10 steps of 1 task x 2 CPU replicas give
// bit-identical weights to 2 tasks x 1 replica (each contribution rounded,
// summed in FP32, rounded once, on either layout: shared memory between the
// tasks), and both stay within a stated tolerance of FP32 gradients, yet
// differ from them (the gradients were rounded):
//   bf16  relative L2 error <= 5e-3 (8 significant bits; measured 3.2e-3 mlp, 1.2e-3 cnn)
//   fp16  relative L2 error <= 3e-4 (11 significant bits; measured 1.0e-4 mlp)
// The two tasks run as threads of this process (tests/util/equivalence_test_util.h).
#include <gtest/gtest.h>

#include "tests/util/equivalence_test_util.h"

namespace mirrored {
namespace {

using testing_util::EquivalenceOptions;

constexpr int64_t kGlobalBatch = 64;

struct Case {
  std::string dtype;
  double tolerance_against_fp32;
};

void ExpectEquivalent(const std::string& model, const Case& c) {
  TrainerOptions fp32 = EquivalenceOptions(kGlobalBatch / 2);
  fp32.model.name = model;
  TrainerOptions sixteen = fp32;
  sixteen.communication.allreduce_dtype = c.dtype;
  const int64_t steps = fp32.steps.max_steps;
  const std::vector<float> reference = testing_util::TrainAlone(fp32, steps, /*cpu_replicas=*/2);
  const std::vector<float> one_task = testing_util::TrainAlone(sixteen, steps, /*cpu_replicas=*/2);
  const std::vector<float> two_tasks = testing_util::TrainTwoWorkers(sixteen, /*cpu_replicas=*/1, steps);
  const std::string what = model + " " + c.dtype;
  // The layouts round alike and sum alike: the same bits.
  testing_util::ExpectSameWeights(what + ", 1 task x 2 replicas vs 2 tasks x 1", one_task, two_tasks,
                                  /*tolerance=*/0);
  testing_util::ExpectSameWeights(what + " vs fp32 gradients, 1 task x 2 replicas", reference, one_task,
                                  c.tolerance_against_fp32);
  testing_util::ExpectSameWeights(what + " vs fp32 gradients, 2 tasks x 1 replica", reference, two_tasks,
                                  c.tolerance_against_fp32);
  EXPECT_GT(testing_util::RelativeError(reference, one_task), 1e-5) << what << ": nothing was rounded";
}

const Case kBf16{"bf16", 5e-3};
const Case kFp16{"fp16", 3e-4};

TEST(AllreduceDtypeEquivalenceTest, MlpBf16) { ExpectEquivalent("mlp", kBf16); }
TEST(AllreduceDtypeEquivalenceTest, MlpFp16) { ExpectEquivalent("mlp", kFp16); }
TEST(AllreduceDtypeEquivalenceTest, CnnBf16) { ExpectEquivalent("cnn", kBf16); }

}  // namespace
}  // namespace mirrored
