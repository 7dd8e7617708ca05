// --precision bf16 on the CPU (labels `unit`, `cpu-bf16`; skipped where the
// CPU or oneDNN lacks bf16 instructions, failed there instead when
// MIRRORED_REQUIRE_CPU_BF16 is set). The dense and convolution kernels
// against a double-precision reference of bf16-rounded operands (tight: the
// products really read bf16, and accumulate in FP32) and of the unrounded
// ones (loose, yet not as close as FP32: they are not FP32); a layer with
// 3 input channels staying FP32; the zoo's models against FP32 within the
// GPU test's tolerances; bf16 runs repeating bit for bit; and (on every
// CPU) which oneDNN instruction sets count as bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tests/model/random_batch.h"
#include "tests/util/cpu_bf16_test_util.h"
#include "tests/util/half_rounding.h"
#include "worker/model/cpu_dnnl_kernels.h"
#include "worker/model/model.h"

namespace mirrored::model {
namespace {

using testing_util::RoundBf16;

std::vector<float> Rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = RoundBf16(v[i]);
  return r;
}

std::vector<float> Random(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

// sqrt(sum (a-b)^2 / sum b^2), printed.
double RelativeL2(const std::vector<float>& a, const std::vector<double>& b, const std::string& what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  std::printf("%s: relative L2 error %.3g\n", what.c_str(), rel);
  return rel;
}

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  return RelativeL2(a, std::vector<double>(b.begin(), b.end()), what);
}

// A layer's outputs and gradients: computed by a kernel (float) or by the
// reference (double).
template <typename T>
struct LayerResult {
  std::vector<T> y, dx, dw, db;
};

// What both references share: operand rounding, and the comparisons.
// Tight bound: FP32 accumulation of bf16 products; loose: bf16's 8-bit
// mantissa against unrounded operands, which FP32 would meet at ~1e-7.
constexpr double kRoundedOperandsL2 = 1e-5;
constexpr double kUnroundedOperandsL2 = 2e-2;
constexpr double kNotFp32L2 = 1e-4;

void ExpectBf16Agreement(const LayerResult<float>& got, const LayerResult<double>& rounded,
                         const LayerResult<double>& exact, const std::string& what, bool bias = true) {
  struct Part {
    const char* name;
    const std::vector<float>& got;
    const std::vector<double>& rounded;
    const std::vector<double>& exact;
  };
  for (const Part& p : {Part{"y", got.y, rounded.y, exact.y}, Part{"dx", got.dx, rounded.dx, exact.dx},
                        Part{"dw", got.dw, rounded.dw, exact.dw}}) {
    const std::string w = what + " " + p.name;
    EXPECT_LE(RelativeL2(p.got, p.rounded, w + " vs rounded operands"), kRoundedOperandsL2) << w;
    const double e = RelativeL2(p.got, p.exact, w + " vs FP32 operands");
    EXPECT_LE(e, kUnroundedOperandsL2) << w;
    EXPECT_GT(e, kNotFp32L2) << w << ": as close as FP32: the product did not read bf16";
  }
  // The bias gradient sums the FP32 output gradient: rounding plays no part.
  if (bias) EXPECT_LE(RelativeL2(got.db, exact.db, what + " db"), 1e-6) << what;
}

// Runs on every CPU: which oneDNN instruction sets (dnnl_cpu_isa_t, 2.6)
// hold bf16 products.
TEST(DnnlIsaTest, Bf16IsAvx512Bf16OrASupersetOfIt) {
  EXPECT_TRUE(DnnlIsaHasBf16(0xe7));    // avx512_core_bf16
  EXPECT_TRUE(DnnlIsaHasBf16(0x3e7));   // avx512_core_amx
  EXPECT_FALSE(DnnlIsaHasBf16(0x67));   // avx512_core_vnni
  EXPECT_FALSE(DnnlIsaHasBf16(0x27));   // avx512_core
  EXPECT_FALSE(DnnlIsaHasBf16(0x407));  // avx2_vnni
  EXPECT_FALSE(DnnlIsaHasBf16(0x7));    // avx2
  EXPECT_FALSE(DnnlIsaHasBf16(0x0));
}

// ---------------------------------------------------------------- dense ----
LayerResult<double> DenseReference(int n, const DenseSpec& s, const std::vector<float>& x,
                                   const std::vector<float>& w, const std::vector<float>& b,
                                   const std::vector<float>& dy) {
  LayerResult<double> r{std::vector<double>(size_t(n) * s.out), std::vector<double>(size_t(n) * s.in),
                        std::vector<double>(size_t(s.in) * s.out), std::vector<double>(s.out)};
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < s.out; ++o) {
      double acc = b[o];
      for (int k = 0; k < s.in; ++k) acc += double(x[size_t(i) * s.in + k]) * w[size_t(k) * s.out + o];
      r.y[size_t(i) * s.out + o] = acc;
      const double g = dy[size_t(i) * s.out + o];
      r.db[o] += g;
      for (int k = 0; k < s.in; ++k) {
        r.dx[size_t(i) * s.in + k] += g * w[size_t(k) * s.out + o];
        r.dw[size_t(k) * s.out + o] += g * x[size_t(i) * s.in + k];
      }
    }
  return r;
}

LayerResult<float> RunDense(Backend& be, int n, const DenseSpec& s, const std::vector<float>& x,
                            const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& dy) {
  auto k = be.MakeDense(s);
  LayerResult<float> r{std::vector<float>(size_t(n) * s.out), std::vector<float>(size_t(n) * s.in),
                       std::vector<float>(w.size()), std::vector<float>(b.size())};
  k->Forward(n, x.data(), w.data(), b.data(), r.y.data());
  k->Backward(n, x.data(), w.data(), dy.data(), r.dx.data(), r.dw.data(), r.db.data());
  return r;
}

class CpuBf16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    MIRRORED_SKIP_OR_FAIL_WITHOUT_CPU_BF16();
    auto be = MakeCpuBackend(Precision::kBf16);
    ASSERT_TRUE(be.ok()) << be.status();
    bf16_ = std::move(be).value();
  }
  std::unique_ptr<Backend> bf16_;
  std::unique_ptr<Backend> fp32_ = MakeCpuBackend();
};

TEST_F(CpuBf16Test, DenseProductsReadBf16AndAccumulateInFp32) {
  const int n = 37;
  const DenseSpec s{.in = 70, .out = 29, .relu = false};
  const std::vector<float> x = Random(size_t(n) * s.in, 1), w = Random(size_t(s.in) * s.out, 2),
                           b = Random(s.out, 3), dy = Random(size_t(n) * s.out, 4);
  const LayerResult<float> got = RunDense(*bf16_, n, s, x, w, b, dy);
  ExpectBf16Agreement(got, DenseReference(n, s, Rounded(x), Rounded(w), b, Rounded(dy)),
                      DenseReference(n, s, x, w, b, dy), "dense");
  // The fused ReLU applies to the FP32 sum.
  const LayerResult<float> relu = RunDense(*bf16_, n, DenseSpec{s.in, s.out, true}, x, w, b, dy);
  for (size_t i = 0; i < got.y.size(); ++i) ASSERT_EQ(relu.y[i], std::fmax(got.y[i], 0.f)) << i;
}

// ----------------------------------------------------------------- conv ----
// NHWC activations, HWIO kernels, the spec's padding; dy is the gradient of
// the pre-activation output.
LayerResult<double> ConvReference(int n, const ConvSpec& s, const std::vector<float>& x,
                                  const std::vector<float>& w, const std::vector<float>& b,
                                  const std::vector<float>& dy) {
  const int oh = s.out_h(), ow = s.out_w(), k = s.kernel, ic = s.in_c, oc = s.out_c;
  LayerResult<double> r{std::vector<double>(size_t(n) * oh * ow * oc), std::vector<double>(x.size()),
                        std::vector<double>(w.size()), std::vector<double>(oc)};
  for (int bi = 0; bi < n; ++bi)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int o = 0; o < oc; ++o) {
          const size_t out = ((size_t(bi) * oh + i) * ow + j) * oc + o;
          double acc = s.bias ? b[o] : 0.0;
          const double g = dy[out];
          r.db[o] += g;
          for (int kh = 0; kh < k; ++kh)
            for (int kw = 0; kw < k; ++kw) {
              const int hi = i * s.stride - s.pad_h.before + kh, wi = j * s.stride - s.pad_w.before + kw;
              if (hi < 0 || hi >= s.in_h || wi < 0 || wi >= s.in_w) continue;
              for (int c = 0; c < ic; ++c) {
                const size_t in = ((size_t(bi) * s.in_h + hi) * s.in_w + wi) * ic + c;
                const size_t wt = ((size_t(kh) * k + kw) * ic + c) * oc + o;
                acc += double(x[in]) * w[wt];
                r.dx[in] += g * w[wt];
                r.dw[wt] += g * x[in];
              }
            }
          r.y[out] = acc;
        }
  return r;
}

LayerResult<float> RunConv(Backend& be, int n, const ConvSpec& s, const std::vector<float>& x,
                           const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& dy) {
  auto k = be.MakeConv(s);
  LayerResult<float> r{std::vector<float>(dy.size()), std::vector<float>(x.size()), std::vector<float>(w.size()),
                       std::vector<float>(size_t(s.out_c))};
  k->Forward(n, x.data(), w.data(), s.bias ? b.data() : nullptr, r.y.data());
  k->Backward(n, x.data(), w.data(), dy.data(), r.dx.data(), r.dw.data(), r.db.data());
  return r;
}

struct ConvCase {
  std::string name;
  ConvSpec spec;
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

class CpuBf16ConvTest : public CpuBf16Test, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(CpuBf16ConvTest, ProductsReadBf16AndAccumulateInFp32) {
  const ConvSpec& s = GetParam().spec;
  const int n = 5;
  const std::vector<float> x = Random(size_t(n) * s.in_h * s.in_w * s.in_c, 11),
                           w = Random(size_t(s.kernel) * s.kernel * s.in_c * s.out_c, 12), b = Random(s.out_c, 13),
                           dy = Random(size_t(n) * s.out_h() * s.out_w() * s.out_c, 14);
  const LayerResult<float> got = RunConv(*bf16_, n, s, x, w, b, dy);
  ExpectBf16Agreement(got, ConvReference(n, s, Rounded(x), Rounded(w), b, Rounded(dy)),
                      ConvReference(n, s, x, w, b, dy), GetParam().name, s.bias);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuBf16ConvTest,
    ::testing::Values(
        ConvCase{"same3x3_bias", ConvSpec{.in_h = 9, .in_w = 7, .in_c = 16, .out_c = 24, .kernel = 3}.SamePadded()},
        ConvCase{"same3x3_stride2_nobias", ConvSpec{.in_h = 10, .in_w = 11, .in_c = 32, .out_c = 8, .kernel = 3,
                                                    .stride = 2, .bias = false}
                                               .SamePadded()},
        ConvCase{"valid5x5", ConvSpec{.in_h = 12, .in_w = 12, .in_c = 8, .out_c = 16, .kernel = 5}},
        ConvCase{"pointwise_stride2", ConvSpec{.in_h = 8, .in_w = 8, .in_c = 16, .out_c = 32, .kernel = 1,
                                               .stride = 2, .bias = false}}),
    [](const auto& info) { return info.param.name; });

// An image's first convolution (input channels not a multiple of 8) stays
// FP32, as on the GPU: the same bits as the FP32 backend.
TEST_F(CpuBf16Test, AConvolutionOfThreeInputChannelsStaysFp32) {
  for (const ConvSpec& s : {ConvSpec{.in_h = 10, .in_w = 10, .in_c = 3, .out_c = 16, .kernel = 3}.SamePadded(),
                            ConvSpec{.in_h = 6, .in_w = 6, .in_c = 3, .out_c = 8, .kernel = 1}}) {
    EXPECT_FALSE(ConvComputesIn16Bit(s));
    const int n = 4;
    const std::vector<float> x = Random(size_t(n) * s.in_h * s.in_w * s.in_c, 21),
                             w = Random(size_t(s.kernel) * s.kernel * s.in_c * s.out_c, 22),
                             b = Random(s.out_c, 23), dy = Random(size_t(n) * s.out_h() * s.out_w() * s.out_c, 24);
    const LayerResult<float> a = RunConv(*bf16_, n, s, x, w, b, dy), f = RunConv(*fp32_, n, s, x, w, b, dy);
    EXPECT_EQ(a.y, f.y) << s.kernel;
    EXPECT_EQ(a.dx, f.dx) << s.kernel;
    EXPECT_EQ(a.dw, f.dw) << s.kernel;
    EXPECT_EQ(a.db, f.db) << s.kernel;
  }
}

// ---------------------------------------------------------------- models ----
struct ModelCase {
  std::string model;
  double logits_l2, grads_l2;  // tolerated against FP32 (gpu_precision_test's bf16 bounds)
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model; }

class CpuBf16ModelTest : public CpuBf16Test, public ::testing::WithParamInterface<ModelCase> {};

// The same weights and batch through the FP32 and the bf16 model; and the
// bf16 model twice, which must repeat bit for bit (resume, equivalence).
TEST_P(CpuBf16ModelTest, LogitsAndGradientsNearFp32AndRepeatable) {
  const ModelCase& c = GetParam();
  auto again = MakeCpuBackend(Precision::kBf16);
  ASSERT_TRUE(again.ok()) << again.status();
  auto ref = Model::Create(c.model, std::move(fp32_), 17), mixed = Model::Create(c.model, std::move(bf16_), 17),
       twin = Model::Create(c.model, std::move(again).value(), 17);
  ASSERT_TRUE(ref.ok() && mixed.ok() && twin.ok());
  const int n = 32;
  const RandomBatch batch = MakeRandomBatch(n, 3);
  std::vector<float> w(n, 1.f / n);
  for (auto* m : {&*ref, &*mixed, &*twin}) {
    (*m)->Forward(n, batch.images.data(), batch.labels.data(), true);
    (*m)->Backward(w.data(), {});
  }
  const double logits = RelativeL2((*mixed)->logits(), (*ref)->logits(), c.model + " logits");
  EXPECT_LE(logits, c.logits_l2);
  EXPECT_GT(logits, 1e-5) << c.model << ": as close as FP32 to FP32";
  EXPECT_LE(RelativeL2((*mixed)->store().DownloadGrads(), (*ref)->store().DownloadGrads(), c.model + " gradients"),
            c.grads_l2);
  EXPECT_EQ((*mixed)->logits(), (*twin)->logits());
  EXPECT_EQ((*mixed)->store().DownloadGrads(), (*twin)->store().DownloadGrads());
  EXPECT_EQ((*mixed)->store().DownloadState(), (*twin)->store().DownloadState());
}

INSTANTIATE_TEST_SUITE_P(Models, CpuBf16ModelTest,
                         ::testing::Values(ModelCase{"mlp", 2e-2, 0.1}, ModelCase{"cnn", 2e-2, 0.1},
                                           ModelCase{"resnet", 2e-2, 0.15}),
                         [](const auto& info) { return info.param.model; });

}  // namespace
}  // namespace mirrored::model
