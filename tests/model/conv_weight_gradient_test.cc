// The CPU convolution's kernel gradient by im2col + GEMM against oneDNN's
// backward-weights primitive, the implementation it replaced: the cnn's two
// layers (a single input channel; 32), strides, "same" padding with its odd
// pixel after, even and 5x5 kernels, no bias, batches 1 and 64 (64 spans
// several of the gather's chunks on the larger layers), one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "worker/model/cpu_backend.h"
#include "worker/model/cpu_dnnl_kernels.h"

namespace mirrored::model {
namespace {

struct Gradients {
  std::vector<float> dx, dw, db;
};

std::string Describe(const ConvSpec& s, int n) {
  return std::to_string(s.in_h) + "x" + std::to_string(s.in_w) + "x" + std::to_string(s.in_c) + "->" +
         std::to_string(s.out_c) + " k" + std::to_string(s.kernel) + " s" + std::to_string(s.stride) + " pad " +
         std::to_string(s.pad_h.before) + "," + std::to_string(s.pad_h.after) + (s.bias ? "" : " no bias") +
         " batch " + std::to_string(n);
}

// Backward of `how`'s kernel on (x, w, dy), its outputs first filled with
// NaN: every element must be written, none accumulated onto.
Gradients RunBackward(ConvWeightGradient how, const ConvSpec& s, int n, const std::vector<float>& x,
                      const std::vector<float>& w, const std::vector<float>& dy, bool need_dx) {
  DnnlContext ctx;
  std::unique_ptr<ConvKernel> k = MakeDnnlConv(&ctx, s, how);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Gradients g{std::vector<float>(x.size(), nan), std::vector<float>(w.size(), nan),
              std::vector<float>(size_t(s.out_c), nan)};
  k->Backward(n, x.data(), w.data(), dy.data(), need_dx ? g.dx.data() : nullptr, g.dw.data(), g.db.data());
  return g;
}

// |want - got| <= tolerance * max(1, max |want|) everywhere.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  constexpr double kTolerance = 1e-5;
  ASSERT_EQ(want.size(), got.size()) << what;
  double scale = 1, worst = 0;
  size_t at = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(want[i]) - got[i]);
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as the worst
  }
  EXPECT_LE(worst, kTolerance * scale) << what << "[" << at << "]: oneDNN " << want[at] << ", im2col " << got[at];
}

void ExpectMatchesOneDnn(const ConvSpec& s, int n) {
  const std::string what = Describe(s, n);
  std::mt19937 rng(unsigned(s.in_c * 100 + s.kernel * 10 + s.stride + n));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto random = [&](size_t count) {
    std::vector<float> v(count);
    for (float& e : v) e = u(rng);
    return v;
  };
  const std::vector<float> x = random(size_t(n) * s.in_h * s.in_w * s.in_c),
                           w = random(size_t(s.kernel) * s.kernel * s.in_c * s.out_c),
                           dy = random(size_t(n) * s.out_h() * s.out_w() * s.out_c);
  for (bool need_dx : {true, false}) {
    const Gradients want = RunBackward(ConvWeightGradient::kOneDnn, s, n, x, w, dy, need_dx);
    const Gradients got = RunBackward(ConvWeightGradient::kIm2colGemm, s, n, x, w, dy, need_dx);
    ExpectClose(want.dw, got.dw, what + ": kernel gradient");
    if (s.bias) ExpectClose(want.db, got.db, what + ": bias gradient");
    if (need_dx) ExpectClose(want.dx, got.dx, what + ": input gradient");
  }
}

std::vector<ConvSpec> Shapes() {
  std::vector<ConvSpec> shapes{
      {.in_h = 28, .in_w = 28, .in_c = 1, .out_c = 32, .kernel = 3, .relu = true},    // cnn conv1
      {.in_h = 13, .in_w = 13, .in_c = 32, .out_c = 64, .kernel = 3, .relu = true},   // cnn conv2
      {.in_h = 11, .in_w = 9, .in_c = 3, .out_c = 5, .kernel = 3, .stride = 3},      // strided, valid
      {.in_h = 12, .in_w = 10, .in_c = 4, .out_c = 6, .kernel = 2, .bias = false},   // even kernel
  };
  ConvSpec resnet{.in_h = 28, .in_w = 28, .in_c = 32, .out_c = 32, .kernel = 3, .bias = false};
  ConvSpec down{.in_h = 28, .in_w = 28, .in_c = 32, .out_c = 64, .kernel = 3, .stride = 2, .bias = false};
  ConvSpec wide{.in_h = 9, .in_w = 7, .in_c = 2, .out_c = 3, .kernel = 5, .stride = 1};
  ConvSpec stem{.in_h = 28, .in_w = 28, .in_c = 1, .out_c = 32, .kernel = 3, .bias = false};
  ConvSpec mono{.in_h = 9, .in_w = 8, .in_c = 1, .out_c = 4, .kernel = 5, .stride = 2};
  shapes.push_back(resnet.SamePadded());  // 1 before, 1 after
  shapes.push_back(down.SamePadded());    // 0 before, 1 after
  shapes.push_back(wide.SamePadded());    // 2 on each side
  shapes.push_back(stem.SamePadded());    // a single channel, 1 on each side
  shapes.push_back(mono.SamePadded());    // a single channel, strided, 2 and 2 / 1 and 2
  shapes.push_back({.in_h = 10, .in_w = 11, .in_c = 1, .out_c = 3, .kernel = 3, .stride = 2});  // and valid
  return shapes;
}

class ConvWeightGradientTest : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { SetCpuThreadsForThisThread(int(std::max(1u, std::thread::hardware_concurrency()))); }
};

TEST_P(ConvWeightGradientTest, Im2colGemmMatchesOneDnnsPrimitive) {
  SetCpuThreadsForThisThread(GetParam());
  for (const ConvSpec& s : Shapes())
    for (int n : {1, 64}) ExpectMatchesOneDnn(s, n);
}

INSTANTIATE_TEST_SUITE_P(Threads, ConvWeightGradientTest, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "_threads"; });

}  // namespace
}  // namespace mirrored::model
