#include "worker/model/cpu_elementwise.h"

#include <cmath>

#include "common/cpu_simd_clones.h"

// This file is compiled with -fno-math-errno (CMakeLists.txt): with errno
// to set, std::sqrt is a call in a branch and AdamRange's loop stays scalar.
// `omp simd` asserts that iterations are independent, which holds for the
// in-place calls the header allows (y[i] is written from x[i] alone).

namespace mirrored::model {

MIRRORED_SIMD_CLONES void ReluRange(const float* x, float* y, size_t count) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

MIRRORED_SIMD_CLONES void ReluMaskRange(const float* y, float* dy, size_t count) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) dy[i] = y[i] > 0.f ? dy[i] : 0.f;
}

MIRRORED_SIMD_CLONES void AddReluRange(const float* a, const float* b, float* y, size_t count) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    const float s = a[i] + b[i];
    y[i] = s > 0.f ? s : 0.f;
  }
}

MIRRORED_SIMD_CLONES void AccumulateRange(const float* src, float* dst, size_t count) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) dst[i] += src[i];
}

MIRRORED_SIMD_CLONES void MultiplyRange(const float* a, const float* b, float* y, size_t count) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) y[i] = a[i] * b[i];
}

MIRRORED_SIMD_CLONES void ScaleShiftRange(const float* x, float scale, float offset, float* y, size_t count) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) y[i] = x[i] * scale + offset;
}

MIRRORED_SIMD_CLONES void AdamRange(size_t count, float* p, const float* g, float* m, float* v, AdamStep s) {
  const float c1 = 1.f - s.beta1, c2 = 1.f - s.beta2;
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    m[i] = s.beta1 * m[i] + c1 * g[i];
    v[i] = s.beta2 * v[i] + c2 * g[i] * g[i];
    p[i] -= s.lr_t * m[i] / (std::sqrt(v[i]) + s.epsilon);
  }
}

MIRRORED_SIMD_CLONES void SgdMomentumRange(size_t count, float* p, const float* g, float* vel, float lr,
                                          float momentum) {
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    vel[i] = momentum * vel[i] - lr * g[i];
    p[i] += vel[i];
  }
}

}  // namespace mirrored::model
