// CpuMaxPool (cpu_max_pool.h), which keeps each output's argmax and can
// fold in the backward of the ReLU before it, against the formulation it
// replaced, bit for bit: the maximum by `in > out`, then the gradient to
// the first window element equal to the output, found by searching the
// input again, then (with the fold) a separate ReLU mask over dx. Windows
// that tile the input (the cnn's pool1), leave rows and columns uncovered
// (pool2), overlap, or leave gaps; the 2x2 fast path and the general one;
// channel counts that leave vector tails; many ties (zeros after a ReLU,
// a few repeated values), signed zeros and NaN. Then the fold as
// LayerGraph sets it up, conv (ReLU) -> max pool, against the same layers
// run one by one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "worker/model/conv2d_layer.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/layer_graph.h"
#include "worker/model/max_pool2d_layer.h"

namespace mirrored::model {
namespace {

const bool kSingleThreaded = (SetCpuThreadsForThisThread(1), true);

size_t In(const PoolSpec& s, int b, int oh, int ow, int k, int c) {
  const int h = oh * s.stride + k / s.size, w = ow * s.stride + k % s.size;
  return ((size_t(b) * s.in_h + h) * s.in_w + w) * s.channels + c;
}

// The formulation CpuMaxPool replaced, one element at a time.
std::vector<float> ReferenceForward(const PoolSpec& s, int n, const std::vector<float>& x) {
  std::vector<float> y(size_t(n) * s.out_h() * s.out_w() * s.channels);
  size_t o = 0;
  for (int b = 0; b < n; ++b)
    for (int oh = 0; oh < s.out_h(); ++oh)
      for (int ow = 0; ow < s.out_w(); ++ow)
        for (int c = 0; c < s.channels; ++c, ++o) {
          float m = x[In(s, b, oh, ow, 0, c)];
          for (int k = 1; k < s.size * s.size; ++k) m = x[In(s, b, oh, ow, k, c)] > m ? x[In(s, b, oh, ow, k, c)] : m;
          y[o] = m;
        }
  return y;
}

std::vector<float> ReferenceBackward(const PoolSpec& s, int n, const std::vector<float>& x, const std::vector<float>& y,
                                     const std::vector<float>& dy, bool relu_mask) {
  std::vector<float> dx(x.size(), 0.f);
  const bool disjoint = s.stride == s.size;  // each input in one window at most: dx = (not +=) its share
  size_t o = 0;
  for (int b = 0; b < n; ++b)
    for (int oh = 0; oh < s.out_h(); ++oh)
      for (int ow = 0; ow < s.out_w(); ++ow)
        for (int c = 0; c < s.channels; ++c, ++o) {
          float left = dy[o];
          for (int k = 0; k < s.size * s.size; ++k) {
            const bool hit = x[In(s, b, oh, ow, k, c)] == y[o];
            float& d = dx[In(s, b, oh, ow, k, c)];
            const float share = hit ? left : 0.f;
            d = disjoint ? share : d + share;  // written where windows are disjoint, so -0 stays -0
            left = hit ? 0.f : left;
          }
        }
  if (relu_mask)
    for (size_t i = 0; i < dx.size(); ++i) dx[i] = x[i] > 0.f ? dx[i] : 0.f;
  return dx;
}

// Few distinct values, so that windows tie often; after_relu: max(v, 0),
// as a ReLU's output (still with the odd NaN).
std::vector<float> TieProneValues(size_t count, uint32_t seed, bool after_relu) {
  std::mt19937 rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {-1.f, -0.5f, -0.f, 0.f, 0.25f, 0.5f, 0.5f, 1.f, 2.f, nan};
  std::uniform_int_distribution<int> pick(0, 9), fine(0, 3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(count);
  for (float& e : v) {
    e = fine(rng) == 0 ? u(rng) : pool[pick(rng)];
    if (after_relu) e = e > 0.f ? e : 0.f;
  }
  return v;
}

void ExpectSameBits(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
        << what << " [" << i << "]: want " << want[i] << ", got " << got[i];
}

struct PoolCase {
  PoolSpec spec;
  const char* what;
};

const PoolCase kCases[] = {
    {{26, 26, 32, 2, 2}, "cnn pool1: 2x2 windows tile the input"},
    {{11, 11, 64, 2, 2}, "cnn pool2: the last row and column uncovered"},
    {{6, 7, 3, 2, 2}, "odd width, 3 channels"},
    {{9, 9, 12, 3, 3}, "3x3 windows tile the input"},
    {{7, 7, 5, 3, 2}, "overlapping windows"},
    {{8, 8, 9, 2, 3}, "gaps between windows"},
};

class CpuMaxPoolTest : public ::testing::TestWithParam<bool> {};  // the ReLU fold on or off

TEST_P(CpuMaxPoolTest, MatchesTheSearchingFormulationBitForBit) {
  const bool fold = GetParam();
  auto backend = MakeCpuBackend();
  uint32_t seed = 1;
  for (const PoolCase& c : kCases) {
    const PoolSpec& s = c.spec;
    const int n = 3;
    const std::string what = std::string(c.what) + (fold ? ", ReLU folded" : "");
    const std::vector<float> x = TieProneValues(size_t(n) * s.in_h * s.in_w * s.channels, seed++, fold);
    const std::vector<float> dy = TieProneValues(size_t(n) * s.out_h() * s.out_w() * s.channels, seed++, false);
    auto pool = backend->MakeMaxPool(s);
    ASSERT_TRUE(!fold || pool->FoldInputReluMask());
    std::vector<float> y(dy.size()), dx(x.size(), std::numeric_limits<float>::quiet_NaN());  // all must be written
    pool->Forward(n, x.data(), y.data(), /*training=*/true);
    pool->Backward(n, x.data(), y.data(), dy.data(), dx.data());
    const std::vector<float> want_y = ReferenceForward(s, n, x);
    ExpectSameBits(want_y, y, what + ": y");
    ExpectSameBits(ReferenceBackward(s, n, x, want_y, dy, fold), dx, what + ": dx");
    std::vector<float> inference(y.size());
    pool->Forward(n, x.data(), inference.data(), /*training=*/false);
    ExpectSameBits(want_y, inference, what + ": inference y");
  }
}

INSTANTIATE_TEST_SUITE_P(Fold, CpuMaxPoolTest, ::testing::Bool());

// conv (fused ReLU) -> max pool in a LayerGraph, where the pool takes the
// conv's ReLU mask, against the two layers run one after the other.
TEST(CpuMaxPool, FoldedReluMaskInAGraphGivesTheUnfoldedGradients) {
  auto backend = MakeCpuBackend();
  const Shape3 in{12, 12, 3};
  const int n = 4;
  auto make_conv = [] { return std::make_unique<Conv2DLayer>("conv", Conv2DOptions{.filters = 8, .relu = true}); };
  auto make_pool = [] { return std::make_unique<MaxPool2DLayer>("pool", 2, 2); };

  ParameterStore graph_store;
  LayerGraph graph("g");
  graph.AddLayer(make_pool(), graph.AddLayer(make_conv(), LayerGraph::kGraphInput));
  graph.Build(in, &graph_store);
  graph_store.Allocate(backend.get(), 5);
  graph.Bind(backend.get(), &graph_store);

  ParameterStore store;
  auto conv = make_conv();
  auto pool = make_pool();
  pool->Build(conv->Build(in, &store), &store);
  store.Allocate(backend.get(), 5);
  conv->Bind(backend.get(), &store);
  pool->Bind(backend.get(), &store);

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(n) * in.size());
  for (float& v : x) v = u(rng);
  const float* y_graph = graph.Forward(n, x.data(), true);
  const float* y = pool->Forward(n, conv->Forward(n, x.data(), true), true);
  const size_t out = size_t(n) * 5 * 5 * 8;
  ExpectSameBits(std::vector<float>(y, y + out), std::vector<float>(y_graph, y_graph + out), "y");
  std::vector<float> dy(out), dy_graph;
  for (float& v : dy) v = u(rng);
  dy_graph = dy;
  const float* dx_graph = graph.Backward(n, x.data(), dy_graph.data(), true, {});
  const float* dx = conv->Backward(n, x.data(), pool->Backward(n, nullptr, dy.data(), true, {}), true, {});
  ExpectSameBits(std::vector<float>(dx, dx + x.size()), std::vector<float>(dx_graph, dx_graph + x.size()), "dx");
  ExpectSameBits(store.DownloadGrads(), graph_store.DownloadGrads(), "kernel and bias gradients");
}

}  // namespace
}  // namespace mirrored::model
