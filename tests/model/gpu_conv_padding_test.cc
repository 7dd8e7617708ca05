// The GPU's convolutions on TensorFlow's "same" padding, which can pad one
// more pixel after than before (cuDNN's descriptor pads both sides alike,
// so gpu_padded_input_conv.h pads the difference explicitly): each kernel
// against a direct convolution, FP32 and 16-bit; and the Keras fixture's
// model against Keras' outputs and gradients. Label `gpu`; skipped when no
// CUDA device is visible.
#include <gtest/gtest.h>

#include "tests/model/direct_conv.h"
#include "tests/model/keras_reference.h"
#include "tests/util/gpu_test_util.h"

namespace mirrored::model {
namespace {

class GpuConvSamePadding : public ::testing::Test {
 protected:
  void SetUp() override { MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(GpuDeviceCount(), "GpuDeviceCount() is 0"); }
};

TEST_F(GpuConvSamePadding, KernelMatchesADirectConvolution) {
  auto gpu = MakeGpuBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (int in : {7, 5, 1})
    for (int k : {1, 2, 3, 5})
      for (int s : {1, 2, 3}) {
        ConvSpec spec{.in_h = in, .in_w = in + 1, .in_c = 3, .out_c = 4, .kernel = k, .stride = s};
        ExpectConvKernelMatchesDirect(**gpu, spec.SamePadded(), 2, 1e-5);
      }
  ConvSpec no_bias{.in_h = 10, .in_w = 7, .in_c = 2, .out_c = 3, .kernel = 4, .stride = 3, .bias = false};
  ExpectConvKernelMatchesDirect(**gpu, no_bias.SamePadded(), 3, 1e-5);
}

// 8 input channels take the 16-bit tensor-core path under bf16 / fp16: the
// explicit padding wraps it the same way.
TEST_F(GpuConvSamePadding, SixteenBitKernelMatchesADirectConvolution) {
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    auto gpu = MakeGpuBackend(0, p);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    for (int k : {2, 3})
      for (int s : {1, 2}) {
        ConvSpec spec{.in_h = 10, .in_w = 7, .in_c = 8, .out_c = 8, .kernel = k, .stride = s};
        ExpectConvKernelMatchesDirect(**gpu, spec.SamePadded(), 2, p == Precision::kBf16 ? 3e-2 : 5e-3);
      }
  }
}

TEST_F(GpuConvSamePadding, MatchesKerasOutputsLossAndGradients) {
  auto gpu = MakeGpuBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const KerasReference ref = KerasReference::Load();
  const ReferenceRun run = RunKerasReference(std::move(gpu).value(), ref);
  ExpectMatches(ref.output, run.output, 1e-5, "output");
  EXPECT_NEAR(run.loss, ref.loss, 1e-5 * std::max(1.f, ref.loss));
  ASSERT_EQ(run.gradients.size(), ref.gradients.size());
  for (const auto& [name, want] : ref.gradients) ExpectMatches(want, run.gradients.at(name), 1e-5, name);
}

}  // namespace
}  // namespace mirrored::model
