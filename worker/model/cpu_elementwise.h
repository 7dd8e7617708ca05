// The CPU backend's element-wise loops over one contiguous range, single
// threaded: CpuBackend splits a large range among OpenMP threads and calls
// these on each part. Each is vectorised, with an AVX2 copy picked at run
// time (cpu_simd_clones.h); results are the same bit for bit either way.
// The arrays of one call do not overlap, except where a parameter says it
// may be the same array as another.
//
//   ReluMaskRange(y, dy, count);          // dy[i] = y[i] > 0 ? dy[i] : 0
//   AdamRange(count, p, g, m, v, {lr_t, 0.9f, 0.999f, 1e-7f});
#pragma once

#include <cstddef>

namespace mirrored::model {

// y = max(x, 0); y may be x.
void ReluRange(const float* x, float* y, size_t count);
// dy = y > 0 ? dy : 0.
void ReluMaskRange(const float* y, float* dy, size_t count);
// y = max(a + b, 0); y may be a or b.
void AddReluRange(const float* a, const float* b, float* y, size_t count);
// dst += src.
void AccumulateRange(const float* src, float* dst, size_t count);
// y = a * b; y may be a or b.
void MultiplyRange(const float* a, const float* b, float* y, size_t count);
// y = x * scale + offset (two roundings); y may be x.
void ScaleShiftRange(const float* x, float scale, float offset, float* y, size_t count);

struct AdamStep {
  float lr_t, beta1, beta2, epsilon;
};
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g; p -= lr_t m / (sqrt(v) + eps).
void AdamRange(size_t count, float* p, const float* g, float* m, float* v, AdamStep step);
// vel = momentum vel - lr g; p += vel.
void SgdMomentumRange(size_t count, float* p, const float* g, float* vel, float lr, float momentum);

}  // namespace mirrored::model
