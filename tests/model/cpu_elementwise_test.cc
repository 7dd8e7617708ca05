// The CPU backend's element-wise loops (cpu_elementwise.h), vectorised with
// an AVX2 copy picked at run time, against plain scalar loops of the same
// formulas, bit for bit: lengths that leave every tail size, values with
// zeros of both signs, NaN and infinities, in-place calls where the header
// allows them, and CpuBackend's split of a long range among threads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "worker/model/cpu_backend.h"
#include "worker/model/cpu_elementwise.h"

namespace mirrored::model {
namespace {

// Random values in [-2, 2] with the awkward ones sprinkled in.
std::vector<float> Values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  const float special[] = {0.f, -0.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 1e-40f};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 7 == 3 ? special[(i / 7) % 6] : u(rng);
  return v;
}

// Equal bit patterns, NaN included.
void ExpectSameBits(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
        << what << "[" << i << "] of " << want.size() << ": want " << want[i] << ", got " << got[i];
}

const size_t kLengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1031};

TEST(CpuElementwise, UnaryAndBinaryLoopsMatchScalarLoops) {
  for (size_t n : kLengths) {
    const std::vector<float> a = Values(n, 1), b = Values(n, 2);
    std::vector<float> want(n), got(n);
    for (size_t i = 0; i < n; ++i) want[i] = a[i] > 0.f ? a[i] : 0.f;
    ReluRange(a.data(), got.data(), n);
    ExpectSameBits(want, got, "relu");
    for (size_t i = 0; i < n; ++i) want[i] = a[i] > 0.f ? b[i] : 0.f;
    got = b;
    ReluMaskRange(a.data(), got.data(), n);
    ExpectSameBits(want, got, "relu mask");
    for (size_t i = 0; i < n; ++i) want[i] = a[i] + b[i] > 0.f ? a[i] + b[i] : 0.f;
    got = a;
    AddReluRange(got.data(), b.data(), got.data(), n);  // in place
    ExpectSameBits(want, got, "add relu");
    for (size_t i = 0; i < n; ++i) want[i] = b[i] + a[i];
    got = b;
    AccumulateRange(a.data(), got.data(), n);
    ExpectSameBits(want, got, "accumulate");
    for (size_t i = 0; i < n; ++i) want[i] = a[i] * b[i];
    MultiplyRange(a.data(), b.data(), got.data(), n);
    ExpectSameBits(want, got, "multiply");
    for (size_t i = 0; i < n; ++i) want[i] = a[i] * 0.37f + -1.3f;
    ScaleShiftRange(a.data(), 0.37f, -1.3f, got.data(), n);
    ExpectSameBits(want, got, "scale shift");
  }
}

TEST(CpuElementwise, OptimizerUpdatesMatchScalarLoops) {
  const AdamStep step{1e-3f * 0.97f, 0.9f, 0.999f, 1e-7f};
  for (size_t n : kLengths) {
    const std::vector<float> g = Values(n, 3), m0 = Values(n, 4), p0 = Values(n, 6);
    std::vector<float> v0 = Values(n, 5);
    for (float& x : v0) x = std::fabs(x);  // Adam's second moment is never negative
    std::vector<float> p = p0, m = m0, v = v0;
    for (size_t i = 0; i < n; ++i) {
      m[i] = step.beta1 * m[i] + (1.f - step.beta1) * g[i];
      v[i] = step.beta2 * v[i] + (1.f - step.beta2) * g[i] * g[i];
      p[i] -= step.lr_t * m[i] / (std::sqrt(v[i]) + step.epsilon);
    }
    std::vector<float> gp = p0, gm = m0, gv = v0;
    AdamRange(n, gp.data(), g.data(), gm.data(), gv.data(), step);
    ExpectSameBits(m, gm, "adam m");
    ExpectSameBits(v, gv, "adam v");
    ExpectSameBits(p, gp, "adam p");
    std::vector<float> vel = m0, want_p = p0;
    for (size_t i = 0; i < n; ++i) {
      vel[i] = 0.9f * vel[i] - 0.01f * g[i];
      want_p[i] += vel[i];
    }
    std::vector<float> got_vel = m0, got_p = p0;
    SgdMomentumRange(n, got_p.data(), g.data(), got_vel.data(), 0.01f, 0.9f);
    ExpectSameBits(vel, got_vel, "sgd velocity");
    ExpectSameBits(want_p, got_p, "sgd p");
  }
}

// CpuBackend splits ranges above its threshold among threads: every
// element is still done once, and the result is the one-range result.
TEST(CpuElementwise, BackendSplitsLongRangesAmongThreadsWithTheSameResult) {
  SetCpuThreadsForThisThread(2);
  auto backend = MakeCpuBackend();
  for (size_t n : {size_t(1) << 15, (size_t(1) << 15) + 1, size_t(100003)}) {
    const std::vector<float> a = Values(n, 7), b = Values(n, 8);
    std::vector<float> want = b, got = b;
    AccumulateRange(a.data(), want.data(), n);
    backend->Accumulate(a.data(), got.data(), n);
    ExpectSameBits(want, got, "accumulate " + std::to_string(n));
    want = b, got = b;
    ReluMaskRange(a.data(), want.data(), n);
    backend->ReluMask(a.data(), got.data(), n);
    ExpectSameBits(want, got, "relu mask " + std::to_string(n));
  }
  SetCpuThreadsForThisThread(1);
}

}  // namespace
}  // namespace mirrored::model
