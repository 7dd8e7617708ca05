// GPU vs CPU for --model-json models: the layers the Keras reader added
// (AveragePooling2D, Dropout, Rescaling, Add in a LayerGraph) give the same
// logits, losses and gradients on both backends within float32 tolerance.
// Label `gpu`; skipped when no CUDA device is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/util/gpu_test_util.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/model_choice.h"

namespace mirrored::model {
namespace {

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(a[i]) * a[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

class GpuKerasJsonTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(GpuDeviceCount(), "GpuDeviceCount() is 0"); }
};

TEST_P(GpuKerasJsonTest, SameLogitsAndGradientsAsTheCpu) {
  auto choice = ModelChoice::FromFlags("", std::string(MIRRORED_SOURCE_DIR) + "/tests/model/keras/" + GetParam() + ".json");
  ASSERT_TRUE(choice.ok()) << choice.status();
  const Shape3 in = choice->keras()->input_shape();
  const int classes = choice->keras()->outputs();
  auto gpu_backend = MakeGpuBackend(0);
  ASSERT_TRUE(gpu_backend.ok()) << gpu_backend.status();
  auto cpu = choice->Create(MakeCpuBackend(), 17, in, classes);
  auto gpu = choice->Create(std::move(gpu_backend).value(), 17, in, classes);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  const int n = 16;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(size_t(n) * in.size());
  std::vector<int32_t> y(n);
  for (float& v : x) v = u(rng);
  for (int32_t& v : y) v = int32_t(rng() % uint32_t(classes));
  std::vector<float> w(n, 1.f / n);
  for (Model* m : {cpu->get(), gpu->get()}) {
    m->SetBatchPosition(4, 32);
    m->Forward(n, x.data(), y.data(), true);
    m->Backward(w.data(), {});
  }
  EXPECT_LE(RelativeL2((*cpu)->logits(), (*gpu)->logits()), 1e-5) << GetParam();
  EXPECT_LE(RelativeL2((*cpu)->losses(), (*gpu)->losses()), 1e-5) << GetParam();
  EXPECT_LE(RelativeL2((*cpu)->store().DownloadGrads(), (*gpu)->store().DownloadGrads()), 5e-3) << GetParam();
  (*cpu)->Forward(n, x.data(), y.data(), false);
  (*gpu)->Forward(n, x.data(), y.data(), false);
  EXPECT_LE(RelativeL2((*cpu)->logits(), (*gpu)->logits()), 1e-5) << GetParam() << " inference";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuKerasJsonTest,
                         ::testing::Values("keras3_sequential_cnn", "keras3_residual_no_bn", "tf_keras_functional_resnet",
                                           "tf_keras_same_padding_conv"));

}  // namespace
}  // namespace mirrored::model
