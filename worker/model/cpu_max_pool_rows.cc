#include "worker/model/cpu_max_pool_rows.h"

#include <bit>

#include "common/cpu_simd_clones.h"

// The loops load every operand before comparing and select by `&` or bit
// masks, never `&&` or a select between loads: without a branch GCC
// vectorises them for SSE2 as well as AVX2. The helpers are inlined into
// the cloned entry points, so that each clone vectorises them its way.

namespace mirrored::model {
namespace {

// Whether output value y passes its gradient under the rule (y == y: not NaN).
template <MaxPoolGradientRule kRule>
[[gnu::always_inline]] inline bool Passes(float y) {
  return kRule == MaxPoolGradientRule::kPositiveOnly ? y > 0.f : y == y;
}

// out = max(out, in) over the channels, a = k where in is strictly greater
// (a tie keeps the earlier element); a by bit mask, which SSE2 vectorises.
[[gnu::always_inline]] inline void TakeGreater(int C, const float* __restrict in, float* __restrict out,
                                               int32_t* __restrict a, int32_t k) {
#pragma omp simd
  for (int c = 0; c < C; ++c) {
    const float v = in[c], max = out[c];
    const int32_t greater = -int32_t(v > max);  // all ones or zero
    out[c] = v > max ? v : max;
    a[c] = (k & greater) | (a[c] & ~greater);
  }
}

// A 2x2 window in one pass: its four rows of channels w0, w1 (top) and w2, w3.
[[gnu::always_inline]] inline void Argmax2x2(int C, const float* __restrict w0, const float* __restrict w1,
                                             const float* __restrict w2, const float* __restrict w3,
                                             float* __restrict out, int32_t* __restrict a) {
#pragma omp simd
  for (int c = 0; c < C; ++c) {
    const float v0 = w0[c], v1 = w1[c], v2 = w2[c], v3 = w3[c];
    const int32_t g1 = -int32_t(v1 > v0);
    const float m1 = v1 > v0 ? v1 : v0;
    const int32_t g2 = -int32_t(v2 > m1);
    const float m2 = v2 > m1 ? v2 : m1;
    const int32_t g3 = -int32_t(v3 > m2);
    out[c] = v3 > m2 ? v3 : m2;
    const int32_t a1 = 1 & g1, a2 = (2 & g2) | (a1 & ~g2);
    a[c] = (3 & g3) | (a2 & ~g3);
  }
}

// Window element k's share of one output's gradient, over the channels:
// d = (or +=) the gradient where k holds the maximum and the rule passes it.
template <MaxPoolGradientRule kRule, bool kAdd>
[[gnu::always_inline]] inline void ScatterTo(int C, const int32_t* __restrict a, const float* __restrict out,
                                             const float* __restrict grad, int32_t k, float* __restrict d) {
#pragma omp simd
  for (int c = 0; c < C; ++c) {
    const float passed = grad[c];
    const bool take = (a[c] == k) & Passes<kRule>(out[c]);
    const float v = take ? passed : 0.f;
    if constexpr (kAdd) {
      d[c] += v;
    } else {
      d[c] = v;
    }
  }
}

// A 2x2 window that no other overlaps, its four input rows written at once.
template <MaxPoolGradientRule kRule>
[[gnu::always_inline]] inline void Scatter2x2(int C, const int32_t* __restrict a, const float* __restrict out,
                                              const float* __restrict grad, float* __restrict d0,
                                              float* __restrict d1, float* __restrict d2, float* __restrict d3) {
#pragma omp simd
  for (int c = 0; c < C; ++c) {
    const float passed = grad[c];
    const int32_t v = std::bit_cast<int32_t>(Passes<kRule>(out[c]) ? passed : 0.f), at = a[c];
    d0[c] = std::bit_cast<float>(v & -int32_t(at == 0));  // v or +0
    d1[c] = std::bit_cast<float>(v & -int32_t(at == 1));
    d2[c] = std::bit_cast<float>(v & -int32_t(at == 2));
    d3[c] = std::bit_cast<float>(v & -int32_t(at == 3));
  }
}

template <MaxPoolGradientRule kRule, bool kAdd>
[[gnu::always_inline]] inline void RowGradient(const MaxPoolRowGeometry& g, const int32_t* argmax, const float* y,
                                               const float* dy, float* dx) {
  const int C = g.channels;
  for (int ow = 0; ow < g.out_w; ++ow) {
    const size_t o = size_t(ow) * C;
    float* window = dx + size_t(ow) * g.stride * C;
    if (!kAdd && g.size == 2) {
      Scatter2x2<kRule>(C, argmax + o, y + o, dy + o, window, window + C, window + g.in_row, window + g.in_row + C);
      continue;
    }
    for (int i = 0, k = 0; i < g.size; ++i)
      for (int j = 0; j < g.size; ++j, ++k)
        ScatterTo<kRule, kAdd>(C, argmax + o, y + o, dy + o, k, window + i * g.in_row + size_t(j) * C);
  }
}

template <bool kAdd>
[[gnu::always_inline]] inline void RowGradientByRule(const MaxPoolRowGeometry& g, MaxPoolGradientRule rule,
                                                     const int32_t* argmax, const float* y, const float* dy,
                                                     float* dx) {
  if (rule == MaxPoolGradientRule::kPositiveOnly) {
    RowGradient<MaxPoolGradientRule::kPositiveOnly, kAdd>(g, argmax, y, dy, dx);
  } else {
    RowGradient<MaxPoolGradientRule::kAll, kAdd>(g, argmax, y, dy, dx);
  }
}

}  // namespace

MIRRORED_SIMD_CLONES void MaxPoolRow(const MaxPoolRowGeometry& g, const float* x, float* y) {
  const int C = g.channels;
  for (int ow = 0; ow < g.out_w; ++ow) {
    const float* window = x + size_t(ow) * g.stride * C;
    float* __restrict out = y + size_t(ow) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) out[c] = window[c];
    for (int i = 0; i < g.size; ++i) {
      for (int j = i == 0 ? 1 : 0; j < g.size; ++j) {
        const float* __restrict in = window + i * g.in_row + size_t(j) * C;
#pragma omp simd
        for (int c = 0; c < C; ++c) {
          const float v = in[c], max = out[c];
          out[c] = v > max ? v : max;
        }
      }
    }
  }
}

MIRRORED_SIMD_CLONES void MaxPoolRowArgmax(const MaxPoolRowGeometry& g, const float* x, float* y, int32_t* argmax) {
  const int C = g.channels;
  for (int ow = 0; ow < g.out_w; ++ow) {
    const float* window = x + size_t(ow) * g.stride * C;
    float* out = y + size_t(ow) * C;
    int32_t* a = argmax + size_t(ow) * C;
    if (g.size == 2) {
      Argmax2x2(C, window, window + C, window + g.in_row, window + g.in_row + C, out, a);
      continue;
    }
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      out[c] = window[c];
      a[c] = 0;
    }
    for (int i = 0, k = 0; i < g.size; ++i)
      for (int j = 0; j < g.size; ++j, ++k)
        if (k > 0) TakeGreater(C, window + i * g.in_row + size_t(j) * C, out, a, k);
  }
}

MIRRORED_SIMD_CLONES void MaxPoolRowGradient(const MaxPoolRowGeometry& g, MaxPoolGradientRule rule,
                                             const int32_t* argmax, const float* y, const float* dy, float* dx) {
  RowGradientByRule<false>(g, rule, argmax, y, dy, dx);
}

MIRRORED_SIMD_CLONES void MaxPoolRowGradientAdd(const MaxPoolRowGeometry& g, MaxPoolGradientRule rule,
                                                const int32_t* argmax, const float* y, const float* dy, float* dx) {
  RowGradientByRule<true>(g, rule, argmax, y, dy, dx);
}

}  // namespace mirrored::model
