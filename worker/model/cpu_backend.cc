#include "worker/model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "mirrored/config.h"
#include "worker/model/cpu_elementwise.h"
#include "worker/model/cpu_max_pool.h"

#include <omp.h>

namespace mirrored::model {
namespace {
// Below this many elements a loop is not worth waking the OpenMP team.
constexpr size_t kParallelMin = 1 << 15;
// Parts start on multiples of this many floats (a 64-byte cache line).
constexpr size_t kPartAlign = 16;

// Calls part(begin, end) over [0, count): at once below kParallelMin, else
// once per OpenMP thread on about equal parts. Element-wise work gives the
// same result however it is split.
template <typename Part>
void InParallelParts(size_t count, const Part& part) {
  if (count <= kParallelMin) {
    part(size_t(0), count);
    return;
  }
#pragma omp parallel
  {
    const size_t threads = size_t(omp_get_num_threads()), t = size_t(omp_get_thread_num());
    const size_t per = (count + threads - 1) / threads, step = (per + kPartAlign - 1) / kPartAlign * kPartAlign;
    const size_t begin = std::min(count, t * step), end = std::min(count, begin + step);
    if (begin < end) part(begin, end);
  }
}
}  // namespace

float* CpuBackend::Allocate(size_t count) {
  size_t bytes = std::max<size_t>((count * sizeof(float) + 255) / 256 * 256, 256);
  void* p = std::aligned_alloc(256, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

void CpuBackend::Free(float* p) { std::free(p); }
void CpuBackend::Upload(const float* host, float* device, size_t count) {
  if (count) std::memcpy(device, host, count * sizeof(float));
}
void CpuBackend::Download(const float* device, float* host, size_t count) {
  if (count) std::memcpy(host, device, count * sizeof(float));
}
void CpuBackend::Copy(const float* src, float* dst, size_t count) {
  if (count == 0 || src == dst) return;
  if (count <= kParallelMin || (src < dst + count && dst < src + count)) {
    std::memmove(dst, src, count * sizeof(float));
    return;
  }
#pragma omp parallel for simd
  for (size_t i = 0; i < count; ++i) dst[i] = src[i];
}
void CpuBackend::Zero(float* p, size_t count) {
  if (count) std::memset(p, 0, count * sizeof(float));
}

std::unique_ptr<DenseKernel> CpuBackend::MakeDense(const DenseSpec& spec) { return MakeDnnlDense(&ctx_, spec); }
std::unique_ptr<ConvKernel> CpuBackend::MakeConv(const ConvSpec& spec) { return MakeDnnlConv(&ctx_, spec); }
std::unique_ptr<PoolKernel> CpuBackend::MakeMaxPool(const PoolSpec& spec) { return MakeCpuMaxPool(spec); }
std::unique_ptr<PoolKernel> CpuBackend::MakeAvgPool(const PoolSpec& spec) { return MakeDnnlAvgPool(&ctx_, spec); }
std::unique_ptr<BatchNormKernel> CpuBackend::MakeBatchNorm(const BatchNormSpec& spec) {
  return MakeDnnlBatchNorm(&ctx_, spec);
}

void CpuBackend::Relu(const float* x, float* y, size_t count) {
  InParallelParts(count, [&](size_t b, size_t e) { ReluRange(x + b, y + b, e - b); });
}

void CpuBackend::ReluMask(const float* y, float* dy, size_t count) {
  InParallelParts(count, [&](size_t b, size_t e) { ReluMaskRange(y + b, dy + b, e - b); });
}

void CpuBackend::AddRelu(const float* a, const float* b, float* y, size_t count) {
  InParallelParts(count, [&](size_t i, size_t e) { AddReluRange(a + i, b + i, y + i, e - i); });
}

void CpuBackend::Accumulate(const float* src, float* dst, size_t count) {
  InParallelParts(count, [&](size_t b, size_t e) { AccumulateRange(src + b, dst + b, e - b); });
}

void CpuBackend::Multiply(const float* a, const float* b, float* y, size_t count) {
  InParallelParts(count, [&](size_t i, size_t e) { MultiplyRange(a + i, b + i, y + i, e - i); });
}

void CpuBackend::ScaleShift(const float* x, float scale, float offset, float* y, size_t count) {
  InParallelParts(count, [&](size_t b, size_t e) { ScaleShiftRange(x + b, scale, offset, y + b, e - b); });
}

void CpuBackend::ChannelsFirstToLast(int n, int hw, int c, const float* x, float* y) {
  for (size_t b = 0; b < size_t(n); ++b)
    for (size_t ch = 0; ch < size_t(c); ++ch)
      for (size_t p = 0; p < size_t(hw); ++p) y[(b * hw + p) * c + ch] = x[(b * c + ch) * hw + p];
}

void CpuBackend::ChannelsLastToFirst(int n, int hw, int c, const float* x, float* y) {
  for (size_t b = 0; b < size_t(n); ++b)
    for (size_t ch = 0; ch < size_t(c); ++ch)
      for (size_t p = 0; p < size_t(hw); ++p) y[(b * c + ch) * hw + p] = x[(b * hw + p) * c + ch];
}

void CpuBackend::GlobalAvgPool(int n, int hw, int c, const float* x, float* y) {
  const float scale = 1.0f / float(hw);
#pragma omp parallel for if (size_t(n) * hw * c > kParallelMin)
  for (int i = 0; i < n; ++i) {
    float* out = y + size_t(i) * c;
    std::fill(out, out + c, 0.f);
    const float* in = x + size_t(i) * hw * c;
    for (int p = 0; p < hw; ++p)
      for (int ch = 0; ch < c; ++ch) out[ch] += in[size_t(p) * c + ch];
    for (int ch = 0; ch < c; ++ch) out[ch] *= scale;
  }
}

void CpuBackend::GlobalAvgPoolBackward(int n, int hw, int c, const float* dy, float* dx) {
  const float scale = 1.0f / float(hw);
#pragma omp parallel for if (size_t(n) * hw * c > kParallelMin)
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < hw; ++p)
      for (int ch = 0; ch < c; ++ch) dx[(size_t(i) * hw + p) * c + ch] = dy[size_t(i) * c + ch] * scale;
}

void CpuBackend::SoftmaxCrossEntropy(int n, int classes, const float* logits, const float* labels, float* losses,
                                     float* probs) {
  for (int i = 0; i < n; ++i) {
    const float* z = logits + size_t(i) * classes;
    float* p = probs + size_t(i) * classes;
    float mx = *std::max_element(z, z + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(double(z[k] - mx));
    const double log_sum = std::log(sum);
    for (int k = 0; k < classes; ++k) p[k] = float(std::exp(double(z[k] - mx) - log_sum));
    const int y = int(labels[i]);
    losses[i] = float(log_sum - double(z[y] - mx));
  }
}

void CpuBackend::SoftmaxCrossEntropyBackward(int n, int classes, const float* probs, const float* labels,
                                             const float* weights, float* dlogits) {
  for (int i = 0; i < n; ++i) {
    const float w = weights[i];
    const int y = int(labels[i]);
    for (int k = 0; k < classes; ++k) {
      size_t j = size_t(i) * classes + k;
      dlogits[j] = w * (probs[j] - (k == y ? 1.f : 0.f));
    }
  }
}

void CpuBackend::AdamUpdate(size_t count, float* p, const float* g, float* m, float* v, float lr_t, float beta1,
                            float beta2, float epsilon) {
  const AdamStep step{lr_t, beta1, beta2, epsilon};
  InParallelParts(count, [&](size_t b, size_t e) { AdamRange(e - b, p + b, g + b, m + b, v + b, step); });
}

void CpuBackend::SgdMomentumUpdate(size_t count, float* p, const float* g, float* vel, float lr, float momentum) {
  InParallelParts(count, [&](size_t b, size_t e) { SgdMomentumRange(e - b, p + b, g + b, vel + b, lr, momentum); });
}

bool CpuBackend::UnscaleAndCheckFinite(float* g, size_t count, float factor) {
  bool finite = true;
  for (size_t i = 0; i < count; ++i) {
    finite &= std::isfinite(g[i]);
    g[i] *= factor;
  }
  return finite;
}

void SetCpuThreadsForThisThread(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

std::unique_ptr<Backend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(Precision precision) {
  MIRRORED_RETURN_IF_ERROR(CheckCpuBackendPrecision(precision));
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(precision));
}

#if !MIRRORED_WITH_CUDA
StatusOr<std::unique_ptr<Backend>> MakeGpuBackend(int ordinal, Precision) {
  return UnavailableError("GPU " + std::to_string(ordinal) +
                          " requested but no CUDA device can be used: mirrored was built without CUDA "
                          "(MIRRORED_WITH_CUDA=OFF)");
}
int GpuDeviceCount() { return 0; }
#endif

}  // namespace mirrored::model
