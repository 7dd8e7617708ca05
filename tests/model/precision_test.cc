// --precision's CPU side (label `unit`): names, the CPU's refusals naming
// what it lacks, fp16's dynamic loss scale (Keras' rules), and the
// loss-scaled optimizer step on the CPU backend: gradients divided back,
// a step with a non-finite gradient skipped without touching anything.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "worker/model/loss_scale.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"
#include "worker/model/precision.h"

namespace mirrored::model {
namespace {

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// Whether /proc/cpuinfo's first "flags" line lists `flag` (the kernel's
// reading of CPUID and XCR0: a source independent of DetectCpuHalfSupport).
bool CpuinfoHasFlag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;)
      if (w == flag) return true;
    return false;
  }
  return false;
}

TEST(PrecisionTest, ParsesTheFourNamesAndRefusesOthersNamingTheFlag) {
  for (const char* name : {"fp32", "tf32", "bf16", "fp16"}) {
    auto p = ParsePrecision(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(PrecisionName(*p), name);
  }
  auto bad = ParsePrecision("float16");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(bad.status(), "--precision \"float16\" is not one of fp32, tf32, bf16, fp16")) << bad.status();
  EXPECT_TRUE(Is16Bit(Precision::kBf16) && Is16Bit(Precision::kFp16) && !Is16Bit(Precision::kTf32));
  EXPECT_TRUE(NeedsLossScaling(Precision::kFp16) && !NeedsLossScaling(Precision::kBf16));
}

TEST(PrecisionTest, TheCpuRefusesWhatItCannotComputeNamingTheInstructionSet) {
  const CpuHalfSupport none{}, bf16{.avx512_bf16 = true}, amx{.amx_bf16 = true}, fp16{.avx512_fp16 = true};
  EXPECT_TRUE(CheckCpuPrecision(Precision::kFp32, none).ok());
  const Status tf32 = CheckCpuPrecision(Precision::kTf32, bf16);
  EXPECT_EQ(tf32.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(tf32, "GPU math mode")) << tf32;
  const Status lacks = CheckCpuPrecision(Precision::kBf16, none);
  EXPECT_EQ(lacks.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(lacks, "needs AVX512_BF16, which this CPU lacks")) << lacks;
  EXPECT_TRUE(Has(lacks, "does not emulate")) << lacks;
  // AVX512_BF16 computes bf16 (oneDNN's kernels, with AMX where present);
  // AMX-BF16 alone does not (oneDNN's AMX kernels need AVX512_BF16); fp16 never.
  EXPECT_TRUE(CheckCpuPrecision(Precision::kBf16, bf16).ok()) << "avx512";
  EXPECT_TRUE(CheckCpuPrecision(Precision::kBf16, CpuHalfSupport{.avx512_bf16 = true, .amx_bf16 = true}).ok());
  EXPECT_TRUE(Has(CheckCpuPrecision(Precision::kBf16, amx), "reports AMX-BF16 alone")) << "amx";
  EXPECT_FALSE(CheckCpuPrecision(Precision::kBf16, fp16).ok()) << "AVX512_FP16 alone";
  EXPECT_TRUE(Has(CheckCpuPrecision(Precision::kFp16, none), "lacks AVX512_FP16")) << "fp16";
  const Status fp16_present = CheckCpuPrecision(Precision::kFp16, fp16);
  EXPECT_EQ(fp16_present.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(fp16_present, "has AVX512_FP16, but")) << fp16_present;
  // This machine's own answer agrees with what Linux says of its CPU.
  EXPECT_EQ(CheckCpuPrecision(Precision::kBf16).ok(), CpuinfoHasFlag("avx512_bf16"));
  const CpuHalfSupport here = DetectCpuHalfSupport();
  EXPECT_EQ(here.amx_bf16, CpuinfoHasFlag("amx_bf16"));
  EXPECT_EQ(here.avx512_fp16, CpuinfoHasFlag("avx512_fp16"));
  EXPECT_FALSE(CheckCpuPrecision(Precision::kFp16).ok());
}

TEST(DynamicLossScaleTest, HalvesAndSkipsOnOverflowDoublesAfterGrowthSteps) {
  DynamicLossScale ls(1024.f, /*growth_steps=*/3);
  EXPECT_EQ(ls.scale(), 1024.f);
  EXPECT_TRUE(ls.Update(true));
  EXPECT_TRUE(ls.Update(true));
  EXPECT_EQ(ls.good_steps(), 2);
  EXPECT_FALSE(ls.Update(false));  // skipped; the run of good steps starts again
  EXPECT_EQ(ls.scale(), 512.f);
  EXPECT_EQ(ls.good_steps(), 0);
  EXPECT_EQ(ls.skipped_steps(), 1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ls.Update(true));
  EXPECT_EQ(ls.scale(), 1024.f);  // doubled after 3 in a row
  EXPECT_EQ(ls.good_steps(), 0);
}

TEST(DynamicLossScaleTest, NeverBelowOneNorInfiniteAndRestoresACheckpointsState) {
  DynamicLossScale low(2.f);
  EXPECT_FALSE(low.Update(false));
  EXPECT_FALSE(low.Update(false));
  EXPECT_EQ(low.scale(), 1.f);
  DynamicLossScale high(3e38f, 1);
  EXPECT_TRUE(high.Update(true));
  EXPECT_EQ(high.scale(), 3e38f);  // 6e38 is not a float
  EXPECT_EQ(DynamicLossScale().scale(), 32768.f);  // Keras' initial scale
  DynamicLossScale restored;
  restored.Restore(4096.f, 17);
  EXPECT_EQ(restored.scale(), 4096.f);
  EXPECT_EQ(restored.good_steps(), 17);
  restored.Restore(0.f, -3);  // out of range: clamped
  EXPECT_EQ(restored.scale(), 1.f);
  EXPECT_EQ(restored.good_steps(), 0);
}

TEST(LossScaledStepTest, DividesTheGradientsBackAndSkipsANonFiniteStepUntouched) {
  auto scaled = Model::Create("mlp", MakeCpuBackend(), 9);
  auto plain = Model::Create("mlp", MakeCpuBackend(), 9);
  ASSERT_TRUE(scaled.ok() && plain.ok());
  auto scaled_opt = Optimizer::Create("adam", 1e-3f), plain_opt = Optimizer::Create("adam", 1e-3f);
  (*scaled_opt)->Bind(&(*scaled)->store(), &(*scaled)->backend());
  (*plain_opt)->Bind(&(*plain)->store(), &(*plain)->backend());
  const int n = 8;
  std::vector<float> x(size_t(n) * 784, 0.25f);
  std::vector<int32_t> y = {0, 1, 2, 3, 4, 5, 6, 7};
  DynamicLossScale ls(256.f);
  std::vector<float> w(n, 1.f / n), w_scaled(n, ls.scale() / n);
  for (auto* m : {&*scaled, &*plain}) (*m)->Forward(n, x.data(), y.data(), true);
  (*scaled)->Backward(w_scaled.data(), {});
  (*plain)->Backward(w.data(), {});
  EXPECT_TRUE((*scaled_opt)->ApplyLossScaled(ls));
  (*plain_opt)->Apply();
  const std::vector<float> a = (*scaled)->store().DownloadParams(), b = (*plain)->store().DownloadParams();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  EXPECT_LT(worst, 1e-6);  // a power-of-two scale: the same update
  EXPECT_EQ((*scaled_opt)->iterations(), 1);

  // A non-finite gradient: nothing moves, the scale halves.
  (*scaled)->Forward(n, x.data(), y.data(), true);
  (*scaled)->Backward(w_scaled.data(), {});
  (*scaled)->store().grads_data()[5] = NAN;
  const std::vector<float> before = (*scaled)->store().DownloadParams(), m_before = (*scaled_opt)->DownloadSlot(0);
  EXPECT_FALSE((*scaled_opt)->ApplyLossScaled(ls));
  EXPECT_EQ((*scaled)->store().DownloadParams(), before);
  EXPECT_EQ((*scaled_opt)->DownloadSlot(0), m_before);
  EXPECT_EQ((*scaled_opt)->iterations(), 1);
  EXPECT_EQ(ls.scale(), 128.f);
  EXPECT_EQ(ls.skipped_steps(), 1);
}

TEST(LossScaledStepTest, CpuUnscaleScalesEveryValueAndFindsInfinityAndNan) {
  auto cpu = MakeCpuBackend();
  std::vector<float> g = {2.f, -4.f, 8.f};
  EXPECT_TRUE(cpu->UnscaleAndCheckFinite(g.data(), g.size(), 0.5f));
  EXPECT_EQ(g, (std::vector<float>{1.f, -2.f, 4.f}));
  g[1] = INFINITY;
  EXPECT_FALSE(cpu->UnscaleAndCheckFinite(g.data(), g.size(), 0.5f));
  g = {1.f, NAN};
  EXPECT_FALSE(cpu->UnscaleAndCheckFinite(g.data(), g.size(), 1.f));
}

}  // namespace
}  // namespace mirrored::model
