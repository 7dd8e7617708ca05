// GPU vs CPU: the same model, weights and batch give the same losses,
// logits, gradients, BatchNorm statistics and Adam update within float32
// tolerance, over two steps and an inference pass. Label `gpu`; skipped when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/model/random_batch.h"
#include "tests/util/gpu_test_util.h"
#include "worker/model/batch_norm_layer.h"
#include "worker/model/conv2d_layer.h"
#include "worker/model/dense_layer.h"
#include "worker/model/max_pool2d_layer.h"
#include "worker/model/model.h"
#include "worker/model/relu_layer.h"
#include "worker/model/optimizer.h"

namespace mirrored::model {
namespace {

// The tensor of `list` that holds buffer index i ("" for padding).
std::string TensorAt(const std::vector<TensorInfo>* list, size_t i) {
  if (list == nullptr) return "";
  for (const TensorInfo& t : *list)
    if (i >= t.offset && i < t.offset + t.size) return " (" + t.name + "[" + std::to_string(i - t.offset) + "])";
  return " (padding)";
}

// Every element: |a - b| <= rel * max |a| + abs; and the whole vector:
// ||a - b|| / ||a|| <= rel_l2. The worst element is named (with its tensor
// when `list` describes the buffer) and both figures are printed.
void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double rel, double abs, double rel_l2,
                 const std::string& what, const std::vector<TensorInfo>* list = nullptr) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0, worst = 0, diff2 = 0, norm2 = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, double(std::fabs(a[i])));
    double d = std::fabs(double(a[i]) - double(b[i]));
    diff2 += d * d;
    norm2 += double(a[i]) * double(a[i]);
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as the worst
  }
  const double l2 = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  std::printf("%s: worst %.3g of scale %.3g, relative L2 error %.3g\n", what.c_str(), worst, scale, l2);
  if (list != nullptr && diff2 > 0) {  // the tensor that contributes most of the difference
    const TensorInfo* top = nullptr;
    double top_diff2 = -1, top_norm2 = 0;
    for (const TensorInfo& t : *list) {
      double d2 = 0, n2 = 0;
      for (size_t i = t.offset; i < t.offset + t.size && i < a.size(); ++i) {
        d2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        n2 += double(a[i]) * a[i];
      }
      if (d2 > top_diff2) top = &t, top_diff2 = d2, top_norm2 = n2;
    }
    std::printf("  %.0f%% of it in %s (its own relative L2 error %.3g)\n", 100 * top_diff2 / diff2,
                top->name.c_str(), top_norm2 > 0 ? std::sqrt(top_diff2 / top_norm2) : 0.0);
  }
  EXPECT_LE(worst, rel * scale + abs) << what << ": worst difference " << worst << " at " << at
                                      << TensorAt(list, at) << " (cpu " << a[at] << ", gpu " << b[at]
                                      << "), scale " << scale;
  EXPECT_LE(l2, rel_l2) << what << ": relative L2 error";
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
  const RandomBatch batch = MakeRandomBatch(n, 3);
  const std::vector<float>& x = batch.images;
  const std::vector<int32_t>& y = batch.labels;
  std::vector<float> w(n, 1.f / n);

  auto copt = Optimizer::Create("adam", 1e-3f), gopt = Optimizer::Create("adam", 1e-3f);
  (*copt)->Bind(&(*cpu)->store(), &(*cpu)->backend());
  (*gopt)->Bind(&(*gpu)->store(), &(*gpu)->backend());
  const auto* params = &(*cpu)->store().trainable();
  const auto* state = &(*cpu)->store().state();
  for (int step = 0; step < 2; ++step) {
    const std::string at = name + " step " + std::to_string(step);
    (*cpu)->Forward(n, x.data(), y.data(), true);
    (*gpu)->Forward(n, x.data(), y.data(), true);
    ExpectClose((*cpu)->logits(), (*gpu)->logits(), 1e-4, 1e-5, 1e-5, at + " logits");
    ExpectClose((*cpu)->losses(), (*gpu)->losses(), 1e-4, 1e-5, 1e-5, at + " losses");
    (*cpu)->Backward(w.data(), {});
    (*gpu)->Backward(w.data(), {});
    if (step == 0) {
      // The same pass again: each backend gives its own gradients back (a
      // buffer read before the first pass wrote it would show here).
      const std::vector<float> cpu_first = (*cpu)->store().DownloadGrads(), gpu_first = (*gpu)->store().DownloadGrads();
      (*cpu)->Forward(n, x.data(), y.data(), true);
      (*gpu)->Forward(n, x.data(), y.data(), true);
      (*cpu)->Backward(w.data(), {});
      (*gpu)->Backward(w.data(), {});
      // (cuDNN's backward-filter algorithms may add with atomics: 1e-7 apart.)
      ExpectClose(cpu_first, (*cpu)->store().DownloadGrads(), 1e-5, 0, 1e-5, at + " cpu gradients again", params);
      ExpectClose(gpu_first, (*gpu)->store().DownloadGrads(), 1e-5, 0, 1e-5, at + " gpu gradients again", params);
    }
    // The gradients get looser bounds than the forward pass. At resnet's
    // initial weights 0.16% of block2/conv1/kernel's gradient differs
    // (relative L2 error 5.6e-4 over all gradients, worst element 8e-4 of the
    // largest; H100, 2026-11-26) while step 1 agrees to 1e-6 and each backend
    // reproduces its own gradients exactly (above). The likely cause: a
    // pre-activation within float noise of zero that the two backends' ReLU
    // masks see on different sides. A wrong kernel is off by O(1).
    ExpectClose((*cpu)->store().DownloadGrads(), (*gpu)->store().DownloadGrads(), 1e-2, 1e-6, 5e-3,
                at + " gradients", params);
    ExpectClose((*cpu)->store().DownloadState(), (*gpu)->store().DownloadState(), 1e-4, 1e-6, 1e-5, at + " BN state",
                state);
    // Adam's first steps move a weight by about lr * g / (|g| + eps): for a
    // gradient near zero (within the float noise checked above) the sign of
    // that noise decides the direction of a step of up to lr, so the update is
    // compared on the same gradients: the CPU's, given to the GPU too.
    const std::vector<float> grads = (*cpu)->store().DownloadGrads();
    (*gpu)->backend().Upload(grads.data(), (*gpu)->store().grads_data(), grads.size());
    (*copt)->Apply();
    (*gopt)->Apply();
    ExpectClose((*cpu)->store().DownloadParams(), (*gpu)->store().DownloadParams(), 1e-4, 1e-6, 1e-5,
                at + " params", params);
  }
  (*cpu)->Forward(n, x.data(), y.data(), false);
  (*gpu)->Forward(n, x.data(), y.data(), false);
  ExpectClose((*cpu)->logits(), (*gpu)->logits(), 1e-4, 1e-5, 1e-5, name + " inference logits");
  EXPECT_EQ((*cpu)->CorrectCount(), (*gpu)->CorrectCount());
}

INSTANTIATE_TEST_SUITE_P(Models, GpuCpuTest, ::testing::Values("mlp", "cnn", "resnet"));

// The GPU's activations are NCHW, the CPU's NHWC: the reorders between them
// agree with the CPU's, both ways, and so does global average pooling on
// the reordered tensor (shapes with c, hw both > 1 and not powers of two).
TEST(GpuBackendTest, ChannelsFirstReordersAndPoolingAgreeWithTheCpu) {
  MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(GpuDeviceCount(), "GpuDeviceCount() is 0");
  auto gpu = MakeGpuBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::unique_ptr<Backend> cpu = MakeCpuBackend();
  ASSERT_TRUE((*gpu)->channels_first());
  ASSERT_FALSE(cpu->channels_first());
  const int n = 3, hw = 49, c = 37;
  const size_t count = size_t(n) * hw * c;
  std::vector<float> nhwc(count);
  for (size_t i = 0; i < count; ++i) nhwc[i] = float(i % 1000) * 0.5f - 7.f;
  std::vector<float> nchw(count), back(count), got(count), pooled_cpu(size_t(n) * c), pooled_gpu(size_t(n) * c);
  cpu->ChannelsLastToFirst(n, hw, c, nhwc.data(), nchw.data());
  cpu->ChannelsFirstToLast(n, hw, c, nchw.data(), back.data());
  EXPECT_EQ(back, nhwc);
  cpu->GlobalAvgPool(n, hw, c, nhwc.data(), pooled_cpu.data());

  Backend& g = **gpu;
  float* d_last = g.Allocate(count);
  float* d_first = g.Allocate(count);
  float* d_pooled = g.Allocate(size_t(n) * c);
  g.Upload(nhwc.data(), d_last, count);
  g.ChannelsLastToFirst(n, hw, c, d_last, d_first);
  g.Download(d_first, got.data(), count);
  EXPECT_EQ(got, nchw);
  g.GlobalAvgPool(n, hw, c, d_first, d_pooled);
  g.Download(d_pooled, pooled_gpu.data(), pooled_gpu.size());
  ExpectClose(pooled_cpu, pooled_gpu, 1e-6, 1e-6, 1e-6, "global average pool");
  g.Zero(d_last, count);
  g.ChannelsFirstToLast(n, hw, c, d_first, d_last);
  g.Download(d_last, got.data(), count);
  EXPECT_EQ(got, nhwc);
  for (float* p : {d_last, d_first, d_pooled}) g.Free(p);
}

// What the zoo's models never do: images with 3 channels (the GPU reorders
// them to NCHW on input) on a non-square image (a swapped h and w would
// show), and a Dense straight on a 4-D activation with no Flatten (it
// reorders to NHWC itself, and its gradient back).
std::unique_ptr<Model> MultiChannelModel(std::unique_ptr<Backend> backend) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Conv2DLayer>(
      "conv", Conv2DOptions{.filters = 4, .kernel = 3, .same_padding = true, .relu = true}));
  layers.push_back(std::make_unique<BatchNormLayer>("bn"));
  layers.push_back(std::make_unique<ReluLayer>("relu"));
  layers.push_back(std::make_unique<MaxPool2DLayer>("pool", 2, 2));
  layers.push_back(std::make_unique<DenseLayer>("dense1", 6, true));
  layers.push_back(std::make_unique<DenseLayer>("dense2", 5, false));
  return std::make_unique<Model>("multichannel", std::move(backend), std::move(layers), Shape3{9, 7, 3}, 5, 23);
}

TEST(GpuBackendTest, MultiChannelInputAndDenseOnAFourDActivationAgreeWithTheCpu) {
  MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(GpuDeviceCount(), "GpuDeviceCount() is 0");
  auto gpu_backend = MakeGpuBackend(0);
  ASSERT_TRUE(gpu_backend.ok()) << gpu_backend.status();
  std::unique_ptr<Model> cpu = MultiChannelModel(MakeCpuBackend());
  std::unique_ptr<Model> gpu = MultiChannelModel(std::move(gpu_backend).value());
  ASSERT_EQ(cpu->store().DownloadParams(), gpu->store().DownloadParams());
  const int n = 6;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(size_t(n) * 9 * 7 * 3);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> y{0, 1, 2, 3, 4, 0};
  std::vector<float> w(n, 1.f / n);
  cpu->Forward(n, x.data(), y.data(), true);
  gpu->Forward(n, x.data(), y.data(), true);
  ExpectClose(cpu->logits(), gpu->logits(), 1e-4, 1e-5, 1e-5, "multichannel logits");
  cpu->Backward(w.data(), {});
  gpu->Backward(w.data(), {});
  ExpectClose(cpu->store().DownloadGrads(), gpu->store().DownloadGrads(), 1e-3, 1e-6, 1e-4, "multichannel gradients",
              &cpu->store().trainable());
  cpu->Forward(n, x.data(), y.data(), false);
  gpu->Forward(n, x.data(), y.data(), false);
  ExpectClose(cpu->logits(), gpu->logits(), 1e-4, 1e-5, 1e-5, "multichannel inference logits");
}

TEST(GpuBackendTest, MissingDeviceIsAClearError) {
  auto b = MakeGpuBackend(GpuDeviceCount() + 3);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("CUDA device"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace mirrored::model
