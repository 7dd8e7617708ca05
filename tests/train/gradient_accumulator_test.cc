// The sum of K micro-batches' gradients: Keep() after each of the first
// K - 1 backward passes, AddTo(i) for each tensor of the last one, leaves
// the gradient buffer holding all K.
#include "worker/train/gradient_accumulator.h"

#include <gtest/gtest.h>

#include <vector>

#include "worker/model/cpu_backend.h"

namespace mirrored {
namespace {

TEST(GradientAccumulatorTest, TheLastMicroBatchsTensorsGetTheEarlierOnesAdded) {
  auto backend = model::MakeCpuBackend();
  const std::vector<BucketSpan> tensors = {{0, 3}, {4, 2}};  // float 3 is padding
  float* grads = backend->Allocate(6);
  GradientAccumulator acc(*backend, grads, 6, tensors);
  auto write = [&](std::vector<float> g) { backend->Upload(g.data(), grads, g.size()); };
  write({1, 2, 3, 0, 4, 5});
  acc.Keep(0);
  write({10, 20, 30, 0, 40, 50});
  acc.Keep(1);
  write({100, 200, 300, 0, 400, 500});  // the last micro-batch, reported tensor by tensor
  acc.AddTo(1);
  acc.AddTo(0);
  std::vector<float> sum(6);
  backend->Download(grads, sum.data(), sum.size());
  EXPECT_EQ(sum, (std::vector<float>{111, 222, 333, 0, 444, 555}));
  // The next step starts its sum afresh.
  write({1, 1, 1, 0, 1, 1});
  acc.Keep(0);
  write({2, 2, 2, 0, 2, 2});
  acc.AddTo(0);
  acc.AddTo(1);
  backend->Download(grads, sum.data(), sum.size());
  EXPECT_EQ(sum, (std::vector<float>{3, 3, 3, 0, 3, 3}));
  backend->Free(grads);
}

}  // namespace
}  // namespace mirrored
