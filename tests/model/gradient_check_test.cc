// Finite-difference gradient checks on the CPU backend for every layer, the
// zoo's residual block (a LayerGraph), the loss, and a whole small model. Central differences in
// float32 with eps 1e-2 (2e-3 for the residual blocks, whose BN + ReLU
// joins put kinks close to most points; inputs are O(1)); points where the two one-sided
// differences disagree straddle a ReLU / max-pool kink and are skipped
// (at most 5% of them), every other point must match to 2% (relative) or
// 2e-3 (absolute).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "worker/model/avg_pool2d_layer.h"
#include "worker/model/batch_norm_layer.h"
#include "worker/model/conv2d_layer.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/dense_layer.h"
#include "worker/model/dropout_layer.h"
#include "worker/model/flatten_layer.h"
#include "worker/model/global_avg_pool_layer.h"
#include "worker/model/layer_graph.h"
#include "worker/model/max_pool2d_layer.h"
#include "worker/model/model.h"
#include "worker/model/relu_layer.h"
#include "worker/model/rescaling_layer.h"

namespace mirrored::model {
namespace {

// Thousands of tiny kernels: one oneDNN thread keeps them fast on a loaded
// machine (libgomp wake-ups dominate otherwise).
const bool kSingleThreaded = (SetCpuThreadsForThisThread(1), true);

float g_eps = 1e-2f;  // per test: smaller where a kink is likely near

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Compares `analytic[i]` with the central difference of `loss` when
// `at(i)` is perturbed, for every i.
void CheckGradient(const std::string& what, std::vector<float> analytic, const std::function<float&(size_t)>& at,
                   const std::function<double()>& loss) {
  size_t skipped = 0, checked = 0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    float& v = at(i);
    const float orig = v;
    const double f0 = loss();
    v = orig + g_eps;
    const double fp = loss();
    v = orig - g_eps;
    const double fm = loss();
    v = orig;
    const double right = (fp - f0) / g_eps, left = (f0 - fm) / g_eps;
    if (std::fabs(right - left) > 0.05 * std::max(1.0, std::fabs(right) + std::fabs(left))) {
      ++skipped;  // a kink between x - eps and x + eps
      continue;
    }
    const double numeric = (fp - fm) / (2 * g_eps);
    ++checked;
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << what << "[" << i << "]";
  }
  EXPECT_LE(skipped, analytic.size() / 20 + 1) << what << ": too many points at a kink";
  EXPECT_GT(checked, 0u) << what;
}

// One layer on the CPU: loss = sum(Forward(x) * r).
class LayerHarness {
 public:
  LayerHarness(std::unique_ptr<Layer> layer, Shape3 in, int n)
      : backend_(MakeCpuBackend()), layer_(std::move(layer)), in_(in), n_(n) {
    out_ = layer_->Build(in, &store_);
    store_.Allocate(backend_.get(), 7);
    // Non-trivial gamma / beta so their gradients are exercised.
    for (size_t t = 0; t < store_.trainable().size(); ++t) {
      const TensorInfo& info = store_.trainable()[t];
      if (info.name.ends_with("gamma") || info.name.ends_with("beta")) {
        auto r = Random(info.size, 100 + uint32_t(t), 0.5f, 1.5f);
        std::copy(r.begin(), r.end(), store_.param(int(t)));
      }
    }
    layer_->Bind(backend_.get(), &store_);
    x_ = Random(size_t(n) * in.size(), 11);
    r_ = Random(size_t(n) * out_.size(), 12);
  }

  double Loss() {
    const float* y = layer_->Forward(n_, x_.data(), /*training=*/true);
    double l = 0;
    for (size_t i = 0; i < r_.size(); ++i) l += double(y[i]) * r_[i];
    return l;
  }

  void Check(const std::string& name) {
    Loss();
    std::vector<float> dy = r_;
    std::vector<int> ready;
    float* dx = layer_->Backward(n_, x_.data(), dy.data(), true, [&](int i) { ready.push_back(i); });
    ASSERT_NE(dx, nullptr);
    std::vector<float> dx_copy(dx, dx + x_.size());
    std::vector<std::vector<float>> grads;
    for (size_t t = 0; t < store_.trainable().size(); ++t)
      grads.emplace_back(store_.grad(int(t)), store_.grad(int(t)) + store_.trainable()[t].size);
    // Every tensor reported once, in strictly decreasing index.
    ASSERT_EQ(ready.size(), store_.trainable().size()) << name;
    for (size_t i = 0; i < ready.size(); ++i) EXPECT_EQ(ready[i], int(ready.size() - 1 - i)) << name;

    auto loss = [&] { return Loss(); };
    CheckGradient(name + " dx", dx_copy, [&](size_t i) -> float& { return x_[i]; }, loss);
    for (size_t t = 0; t < grads.size(); ++t) {
      float* p = store_.param(int(t));
      CheckGradient(name + " d" + store_.trainable()[t].name, grads[t], [&, p](size_t i) -> float& { return p[i]; },
                    loss);
    }
  }

 private:
  std::unique_ptr<Backend> backend_;
  ParameterStore store_;
  std::unique_ptr<Layer> layer_;
  Shape3 in_, out_;
  int n_;
  std::vector<float> x_, r_;
};

TEST(GradientCheck, Dense) {
  LayerHarness(std::make_unique<DenseLayer>("d", 5, false), {1, 1, 7}, 3).Check("dense");
}
TEST(GradientCheck, DenseReluFlattensInput) {
  LayerHarness(std::make_unique<DenseLayer>("d", 6, true), {2, 2, 3}, 4).Check("dense_relu");
}
TEST(GradientCheck, Conv2DValid) {
  LayerHarness(std::make_unique<Conv2DLayer>("c", Conv2DOptions{.filters = 4, .kernel = 3}), {6, 5, 2}, 2)
      .Check("conv_valid");
}
TEST(GradientCheck, Conv2DSameStride2ReluNoBias) {
  // 7 rows pad 1 and 1, 6 columns 0 and 1 (TensorFlow's "same"). A fused
  // ReLU input lies within eps 1e-2 of its kink here: the smaller eps.
  g_eps = 2e-3f;
  Conv2DOptions o{.filters = 3, .kernel = 3, .stride = 2, .same_padding = true, .bias = false, .relu = true};
  LayerHarness(std::make_unique<Conv2DLayer>("c", o), {7, 6, 2}, 2).Check("conv_same_s2");
  g_eps = 1e-2f;
}
TEST(GradientCheck, Conv2DPointwiseStride2) {
  Conv2DOptions o{.filters = 4, .kernel = 1, .stride = 2, .bias = true};
  LayerHarness(std::make_unique<Conv2DLayer>("c", o), {6, 6, 3}, 2).Check("conv_1x1_s2");
}
// Regression: oneDNN 2.6's jit_1x1:avx2 on NHWC with stride 2 corrupted the
// heap here; 1x1 convolutions now run as matmuls.
TEST(GradientCheck, Conv2DPointwiseStride2NoBiasEightChannels) {
  Conv2DOptions o{.filters = 4, .kernel = 1, .stride = 2, .bias = false, .relu = true};
  LayerHarness(std::make_unique<Conv2DLayer>("c", o), {7, 6, 8}, 2).Check("conv_1x1_s2_ic8");
}
TEST(GradientCheck, MaxPool2D) {
  LayerHarness(std::make_unique<MaxPool2DLayer>("p", 2, 2), {6, 7, 3}, 2).Check("maxpool");
}
// Windows that tile the input exactly (dx written without zeroing first),
// and overlapping windows (gradients of two outputs added in one input).
TEST(GradientCheck, MaxPool2DCovering) {
  LayerHarness(std::make_unique<MaxPool2DLayer>("p", 2, 2), {6, 4, 5}, 2).Check("maxpool_covering");
}
TEST(GradientCheck, MaxPool2DOverlapping) {
  LayerHarness(std::make_unique<MaxPool2DLayer>("p", 3, 2), {7, 7, 3}, 2).Check("maxpool_overlapping");
}
// A window of equal values (zeros after a ReLU) sends its gradient to its
// first element only, as oneDNN and TensorFlow do.
TEST(MaxPool2D, TiesGoToTheFirstElementOfTheWindow) {
  auto backend = MakeCpuBackend();
  auto pool = backend->MakeMaxPool(PoolSpec{2, 2, 2, 2, 2});
  // (h, w, c): channel 0 all zeros; channel 1 ties at 1 in (0, 1) and (1, 1).
  const std::vector<float> x{0, 0, 0, 1, 0, 0, 0, 1};
  std::vector<float> y(2), dy{3, 5}, dx(8, -1.f);
  pool->Forward(1, x.data(), y.data(), true);
  pool->Backward(1, x.data(), y.data(), dy.data(), dx.data());
  EXPECT_EQ(y, (std::vector<float>{0, 1}));
  EXPECT_EQ(dx, (std::vector<float>{3, 0, 0, 5, 0, 0, 0, 0}));
}
TEST(GradientCheck, Relu) { LayerHarness(std::make_unique<ReluLayer>("r"), {3, 3, 2}, 2).Check("relu"); }
TEST(GradientCheck, Flatten) { LayerHarness(std::make_unique<FlattenLayer>("f"), {2, 3, 2}, 2).Check("flatten"); }
TEST(GradientCheck, BatchNormTraining) {
  LayerHarness(std::make_unique<BatchNormLayer>("bn"), {3, 3, 4}, 3).Check("batchnorm");
}
TEST(GradientCheck, GlobalAvgPool) {
  LayerHarness(std::make_unique<GlobalAvgPoolLayer>("g"), {3, 4, 5}, 2).Check("gap");
}
// The zoo resnet's block as its Keras JSON makes it: conv3x3(stride) -> BN
// -> ReLU -> conv3x3 -> BN, plus a shortcut (identity, or conv1x1(stride) ->
// BN when the shape changes), joined by Add + ReLU in one node.
std::unique_ptr<LayerGraph> ResidualBlockGraph(int filters, int stride, int in_channels) {
  auto g = std::make_unique<LayerGraph>("b");
  auto conv = [](const std::string& name, int filters, int kernel, int stride) {
    return std::make_unique<Conv2DLayer>(name, Conv2DOptions{.filters = filters, .kernel = kernel, .stride = stride,
                                                             .same_padding = kernel > 1, .bias = false,
                                                             .init = Init::kHeNormal});
  };
  int main = g->AddLayer(conv("b/conv1", filters, 3, stride), LayerGraph::kGraphInput);
  main = g->AddLayer(std::make_unique<BatchNormLayer>("b/bn1"), main);
  main = g->AddLayer(std::make_unique<ReluLayer>("b/relu1"), main);
  main = g->AddLayer(conv("b/conv2", filters, 3, 1), main);
  main = g->AddLayer(std::make_unique<BatchNormLayer>("b/bn2"), main);
  int shortcut = LayerGraph::kGraphInput;
  if (stride != 1 || in_channels != filters) {
    shortcut = g->AddLayer(conv("b/shortcut/conv", filters, 1, stride), LayerGraph::kGraphInput);
    shortcut = g->AddLayer(std::make_unique<BatchNormLayer>("b/shortcut/bn"), shortcut);
  }
  g->AddSum("b/add", {main, shortcut}, /*relu=*/true);
  return g;
}

TEST(GradientCheck, ResidualBlockIdentity) {
  g_eps = 2e-3f;
  LayerHarness(ResidualBlockGraph(3, 1, 3), {4, 4, 3}, 2).Check("residual_identity");
}
TEST(GradientCheck, ResidualBlockProjection) {
  g_eps = 2e-3f;
  LayerHarness(ResidualBlockGraph(4, 2, 2), {6, 6, 2}, 2).Check("residual_projection");
}
// A three-way sum with its ReLU: ((a + b) + c), then max(., 0).
TEST(GradientCheck, LayerGraphThreeWaySumWithRelu) {
  g_eps = 1e-2f;
  auto g = std::make_unique<LayerGraph>("g");
  const int a = g->AddLayer(std::make_unique<DenseLayer>("a", 5, false), LayerGraph::kGraphInput);
  const int b = g->AddLayer(std::make_unique<DenseLayer>("b", 5, false), a);
  const int c = g->AddLayer(std::make_unique<RescalingLayer>("c", 2.f, 0.5f), a);
  const int s = g->AddSum("s", {a, b, c}, /*relu=*/true);
  g->AddLayer(std::make_unique<DenseLayer>("out", 3, false), s);
  LayerHarness(std::move(g), {1, 1, 6}, 3).Check("graph sum relu");
}

TEST(GradientCheck, SoftmaxCrossEntropyWeighted) {
  g_eps = 1e-2f;
  auto be = MakeCpuBackend();
  const int n = 4, k = 5;
  std::vector<float> logits = Random(n * k, 3, -3.f, 3.f), labels{0, 4, 2, 2}, weights{0.25f, 1.f, 0.5f, 2.f};
  std::vector<float> losses(n), probs(n * k), dlogits(n * k);
  auto loss = [&] {
    be->SoftmaxCrossEntropy(n, k, logits.data(), labels.data(), losses.data(), probs.data());
    double l = 0;
    for (int i = 0; i < n; ++i) l += double(weights[i]) * losses[i];
    return l;
  };
  loss();
  // Per-example losses, checked against the formula.
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < k; ++j) s += std::exp(double(logits[i * k + j]));
    EXPECT_NEAR(losses[i], std::log(s) - logits[i * k + int(labels[i])], 1e-5);
  }
  be->SoftmaxCrossEntropyBackward(n, k, probs.data(), labels.data(), weights.data(), dlogits.data());
  CheckGradient("softmax_xent", dlogits, [&](size_t i) -> float& { return logits[i]; }, loss);
}

// A whole model through Model::Forward / Backward with per-example weights.
TEST(GradientCheck, SmallModelEndToEnd) {
  g_eps = 1e-2f;
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Conv2DLayer>(
      "conv", Conv2DOptions{.filters = 3, .kernel = 3, .stride = 2, .same_padding = true, .bias = false}));
  layers.push_back(std::make_unique<BatchNormLayer>("bn"));
  layers.push_back(std::make_unique<ReluLayer>("relu"));
  layers.push_back(std::make_unique<MaxPool2DLayer>("pool", 2, 2));
  layers.push_back(std::make_unique<FlattenLayer>("flatten"));
  layers.push_back(std::make_unique<DenseLayer>("dense", 3, false));
  Model m("tiny", MakeCpuBackend(), std::move(layers), {8, 8, 2}, 3, 5);
  const int n = 4;
  // Input seed 27: its smallest |ReLU input| is 0.015. (With seed 21 and
  // TensorFlow's "same" padding, one is 4e-5: a kink under every kernel
  // weight's perturbation, one-sided slopes apart by less than the skip
  // threshold.)
  std::vector<float> x = Random(n * 128, 27);
  std::vector<int32_t> y{0, 2, 1, 2};
  std::vector<float> w(n, 1.f / n);
  auto loss = [&] {
    m.Forward(n, x.data(), y.data(), true);
    double l = 0;
    for (int i = 0; i < n; ++i) l += double(w[i]) * m.losses()[i];
    return l;
  };
  loss();
  m.Backward(w.data(), {});
  std::vector<float> grads = m.store().DownloadGrads();
  for (size_t t = 0; t < m.store().trainable().size(); ++t) {
    const TensorInfo& info = m.store().trainable()[t];
    std::vector<float> g(grads.begin() + long(info.offset), grads.begin() + long(info.offset + info.size));
    float* p = m.store().param(int(t));
    CheckGradient("model d" + info.name, g, [&, p](size_t i) -> float& { return p[i]; }, loss);
  }
}

// The layers --model-json added (AveragePooling2D, Dropout, Rescaling) and
// the graph that joins Functional branches with Add.
TEST(GradientCheck, AvgPool2D) {
  LayerHarness(std::make_unique<AvgPool2DLayer>("p", 2, 2), {4, 6, 3}, 2).Check("avgpool");
}
TEST(GradientCheck, AvgPool2DOverlapping) {
  LayerHarness(std::make_unique<AvgPool2DLayer>("p", 3, 1), {5, 4, 2}, 2).Check("avgpool3s1");
}
TEST(GradientCheck, DropoutTraining) {
  auto d = std::make_unique<DropoutLayer>("drop", 0.4f);
  d->SetBatchPosition({.seed = 5, .step = 3, .first_example = 8});
  LayerHarness(std::move(d), {3, 3, 4}, 3).Check("dropout");
}
TEST(GradientCheck, Rescaling) {
  LayerHarness(std::make_unique<RescalingLayer>("r", 0.5f, -1.f), {2, 3, 2}, 2).Check("rescaling");
}

// x -> conv -> relu -> conv, plus x: Add -> relu -> dense, where x is the
// graph's input (two consumers) and the add's first branch is a chain.
std::unique_ptr<LayerGraph> ResidualGraph() {
  auto g = std::make_unique<LayerGraph>("g");
  const int c1 = g->AddLayer(std::make_unique<Conv2DLayer>("c1", Conv2DOptions{.filters = 3, .kernel = 3,
                                                                               .same_padding = true, .relu = true}),
                             LayerGraph::kGraphInput);
  const int c2 = g->AddLayer(
      std::make_unique<Conv2DLayer>("c2", Conv2DOptions{.filters = 3, .kernel = 3, .same_padding = true}), c1);
  const int add = g->AddSum("add", {c2, LayerGraph::kGraphInput});
  const int relu = g->AddLayer(std::make_unique<ReluLayer>("relu"), add);
  g->AddLayer(std::make_unique<DenseLayer>("d", 4, false), relu);
  return g;
}

TEST(GradientCheck, LayerGraphResidualAdd) {
  g_eps = 2e-3f;
  LayerHarness(ResidualGraph(), {4, 4, 3}, 2).Check("graph residual");
  g_eps = 1e-2f;
}

// One node read by three (two Adds and a Dense chain): its gradient sums three contributions.
TEST(GradientCheck, LayerGraphFanOutAndThreeWaySum) {
  auto g = std::make_unique<LayerGraph>("g");
  const int a = g->AddLayer(std::make_unique<DenseLayer>("a", 5, false), LayerGraph::kGraphInput);
  const int b = g->AddLayer(std::make_unique<DenseLayer>("b", 5, true), a);
  const int s1 = g->AddSum("s1", {a, b});
  const int c = g->AddLayer(std::make_unique<RescalingLayer>("c", 2.f, 0.5f), a);
  const int s2 = g->AddSum("s2", {s1, c, a});
  g->AddLayer(std::make_unique<DenseLayer>("out", 3, false), s2);
  LayerHarness(std::move(g), {1, 1, 6}, 3).Check("graph fan-out");
}

TEST(LayerGraph, RefusesUnusedNodesAndUnequalSums) {
  ParameterStore store;
  LayerGraph unused("g");
  unused.AddLayer(std::make_unique<DenseLayer>("dead", 3, false), LayerGraph::kGraphInput);
  unused.AddLayer(std::make_unique<DenseLayer>("out", 2, false), LayerGraph::kGraphInput);
  EXPECT_THROW(unused.Build({1, 1, 4}, &store), std::invalid_argument);
  LayerGraph unequal("h");
  const int d = unequal.AddLayer(std::make_unique<DenseLayer>("d", 3, false), LayerGraph::kGraphInput);
  unequal.AddSum("add", {d, LayerGraph::kGraphInput});
  EXPECT_THROW(unequal.Build({1, 1, 4}, &store), std::invalid_argument);
  EXPECT_THROW(unequal.AddLayer(std::make_unique<ReluLayer>("r"), 7), std::invalid_argument);
}

// A mask depends on the example's index in the global batch, not on the
// replica that runs it: replica 1's four examples of a batch of eight get
// what one replica's examples 4-7 got.
TEST(Dropout, MaskFollowsTheExampleNotTheReplica) {
  auto backend = MakeCpuBackend();
  ParameterStore store;
  DropoutLayer whole("drop", 0.5f), half("drop", 0.5f);
  const Shape3 shape{2, 2, 8};
  whole.Build(shape, &store);
  half.Build(shape, &store);
  store.Allocate(backend.get(), 1);
  whole.Bind(backend.get(), &store);
  half.Bind(backend.get(), &store);
  const std::vector<float> x(8 * shape.size(), 1.f);
  whole.SetBatchPosition({.seed = 42, .step = 11, .first_example = 0});
  const float* y8 = whole.Forward(8, x.data(), true);
  half.SetBatchPosition({.seed = 42, .step = 11, .first_example = 4});
  const float* y4 = half.Forward(4, x.data(), true);
  const std::vector<float> tail(y8 + 4 * shape.size(), y8 + 8 * shape.size());
  EXPECT_EQ(std::vector<float>(y4, y4 + 4 * shape.size()), tail);
  size_t dropped = 0;
  for (float v : tail) {
    EXPECT_TRUE(v == 0.f || v == 2.f) << v;
    dropped += v == 0.f;
  }
  EXPECT_GT(dropped, tail.size() / 4);
  EXPECT_LT(dropped, 3 * tail.size() / 4);
  // Another step draws another mask; inference passes x through.
  half.SetBatchPosition({.seed = 42, .step = 12, .first_example = 4});
  const float* next = half.Forward(4, x.data(), true);
  EXPECT_NE(std::vector<float>(next, next + 4 * shape.size()), tail);
  EXPECT_EQ(half.Forward(4, x.data(), false), x.data());
}

}  // namespace
}  // namespace mirrored::model
