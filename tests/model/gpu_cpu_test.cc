// GPU vs CPU: the same model, weights and batch give the same losses,
// logits, gradients, BatchNorm statistics and Adam update within float32
// tolerance. Label `gpu`; skipped when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/util/gpu_test_util.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"

namespace mirrored::model {
namespace {

// max |a - b| <= rel * max |a| + abs, reported with the worst index.
void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double rel, double abs,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, double(std::fabs(a[i])));
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, rel * scale + abs) << what << ": worst difference " << worst << " at " << at << " (cpu "
                                      << a[at] << ", gpu " << b[at] << "), scale " << scale;
}

class GpuCpuTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(GpuDeviceCount(), "GpuDeviceCount() is 0");
  }
};

TEST_P(GpuCpuTest, SameOutputsGradientsAndUpdate) {
  const std::string name = GetParam();
  auto gpu_backend = MakeGpuBackend(0);
  ASSERT_TRUE(gpu_backend.ok()) << gpu_backend.status();
  auto cpu = Model::Create(name, MakeCpuBackend(), 17);
  auto gpu = Model::Create(name, std::move(gpu_backend).value(), 17);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  ASSERT_EQ((*cpu)->store().DownloadParams(), (*gpu)->store().DownloadParams());

  const int n = 32;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(size_t(n) * 784);
  std::vector<int32_t> y(n);
  for (float& v : x) v = u(rng);
  for (int32_t& v : y) v = int32_t(rng() % 10);
  std::vector<float> w(n, 1.f / n);

  auto copt = Optimizer::Create("adam", 1e-3f), gopt = Optimizer::Create("adam", 1e-3f);
  (*copt)->Bind(&(*cpu)->store(), &(*cpu)->backend());
  (*gopt)->Bind(&(*gpu)->store(), &(*gpu)->backend());
  for (int step = 0; step < 2; ++step) {
    const std::string at = name + " step " + std::to_string(step);
    (*cpu)->Forward(n, x.data(), y.data(), true);
    (*gpu)->Forward(n, x.data(), y.data(), true);
    ExpectClose((*cpu)->logits(), (*gpu)->logits(), 1e-4, 1e-5, at + " logits");
    ExpectClose((*cpu)->losses(), (*gpu)->losses(), 1e-4, 1e-5, at + " losses");
    (*cpu)->Backward(w.data(), {});
    (*gpu)->Backward(w.data(), {});
    ExpectClose((*cpu)->store().DownloadGrads(), (*gpu)->store().DownloadGrads(), 1e-3, 1e-6, at + " gradients");
    ExpectClose((*cpu)->store().DownloadState(), (*gpu)->store().DownloadState(), 1e-4, 1e-6, at + " BN state");
    (*copt)->Apply();
    (*gopt)->Apply();
    ExpectClose((*cpu)->store().DownloadParams(), (*gpu)->store().DownloadParams(), 1e-4, 1e-6, at + " params");
  }
  (*cpu)->Forward(n, x.data(), y.data(), false);
  (*gpu)->Forward(n, x.data(), y.data(), false);
  ExpectClose((*cpu)->logits(), (*gpu)->logits(), 1e-4, 1e-5, name + " inference logits");
  EXPECT_EQ((*cpu)->CorrectCount(), (*gpu)->CorrectCount());
}

INSTANTIATE_TEST_SUITE_P(Models, GpuCpuTest, ::testing::Values("mlp", "cnn", "resnet"));

TEST(GpuBackendTest, MissingDeviceIsAClearError) {
  auto b = MakeGpuBackend(GpuDeviceCount() + 3);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("CUDA device"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace mirrored::model
