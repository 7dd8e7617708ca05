#include "worker/model/gpu_kernels.h"

#include <cfloat>

#include "worker/model/cuda_check.h"

namespace mirrored::model::gpu {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}

// Grid-stride loops: any n works with the capped grid of Blocks().
#define MIRRORED_GRID_LOOP(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(blockDim.x) * gridDim.x)

__global__ void ReluK(const float* x, float* y, size_t n) {
  MIRRORED_GRID_LOOP(i, n) y[i] = fmaxf(x[i], 0.f);
}
__global__ void ReluMaskK(const float* y, float* dy, size_t n) {
  MIRRORED_GRID_LOOP(i, n) if (!(y[i] > 0.f)) dy[i] = 0.f;  // NaN too, as on the CPU
}
__global__ void AddReluK(const float* a, const float* b, float* y, size_t n) {
  MIRRORED_GRID_LOOP(i, n) y[i] = fmaxf(a[i] + b[i], 0.f);
}
__global__ void AccumulateK(const float* src, float* dst, size_t n) {
  MIRRORED_GRID_LOOP(i, n) dst[i] += src[i];
}
__global__ void MultiplyK(const float* a, const float* b, float* y, size_t n) {
  MIRRORED_GRID_LOOP(i, n) y[i] = a[i] * b[i];
}
__global__ void ScaleShiftK(const float* x, float scale, float offset, float* y, size_t n) {
  MIRRORED_GRID_LOOP(i, n) y[i] = x[i] * scale + offset;
}
__global__ void BiasActK(float* y, const float* b, size_t n, int c, size_t inner, bool relu) {
  MIRRORED_GRID_LOOP(i, n) {
    float v = y[i] + b[(i / inner) % c];
    y[i] = relu ? fmaxf(v, 0.f) : v;
  }
}
// NCHW: y[i] for i = image * c + channel is the mean of the hw contiguous
// values x[i * hw ...]; a warp per output, its lanes striding the plane, then
// a fixed shuffle tree (deterministic).
__global__ void GapK(size_t outputs, int hw, const float* x, float* y) {
  const size_t warps = size_t(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32; i < outputs; i += warps) {
    float s = 0.f;
    for (int p = lane; p < hw; p += 32) s += x[i * hw + p];
    for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) y[i] = s / float(hw);
  }
}
__global__ void GapBackK(size_t n, int hw, const float* dy, float* dx) {
  MIRRORED_GRID_LOOP(i, n) dx[i] = dy[i / hw] / float(hw);
}
// x[n, c, hw] -> y[n, hw, c], and back; a thread per element of the output.
__global__ void ChannelsFirstToLastK(size_t total, int c, size_t hw, const float* x, float* y) {
  MIRRORED_GRID_LOOP(i, total) {
    const size_t ch = i % c, rest = i / c, p = rest % hw, b = rest / hw;
    y[i] = x[(b * c + ch) * hw + p];
  }
}
__global__ void ChannelsLastToFirstK(size_t total, int c, size_t hw, const float* x, float* y) {
  MIRRORED_GRID_LOOP(i, total) {
    const size_t p = i % hw, rest = i / hw, ch = rest % c, b = rest / c;
    y[i] = x[(b * hw + p) * c + ch];
  }
}
__global__ void XentK(int n, int k, const float* logits, const float* labels, float* losses, float* probs) {
  MIRRORED_GRID_LOOP(i, size_t(n)) {
    const float* z = logits + i * k;
    float mx = -FLT_MAX;
    for (int j = 0; j < k; ++j) mx = fmaxf(mx, z[j]);
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += exp(double(z[j] - mx));
    double log_sum = log(sum);
    for (int j = 0; j < k; ++j) probs[i * k + j] = float(exp(double(z[j] - mx) - log_sum));
    losses[i] = float(log_sum - double(z[int(labels[i])] - mx));
  }
}
__global__ void XentBackK(int n, int k, const float* probs, const float* labels, const float* w, float* d) {
  MIRRORED_GRID_LOOP(i, size_t(n) * k) {
    size_t b = i / k;
    int j = int(i % k);
    d[i] = w[b] * (probs[i] - (j == int(labels[b]) ? 1.f : 0.f));
  }
}
__global__ void AdamK(size_t n, float* p, const float* g, float* m, float* v, float lr_t, float b1, float b2,
                      float eps) {
  MIRRORED_GRID_LOOP(i, n) {
    float mi = b1 * m[i] + (1.f - b1) * g[i];
    float vi = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr_t * mi / (sqrtf(vi) + eps);
  }
}
__global__ void SgdK(size_t n, float* p, const float* g, float* vel, float lr, float mom) {
  MIRRORED_GRID_LOOP(i, n) {
    float v = mom * vel[i] - lr * g[i];
    vel[i] = v;
    p[i] += v;
  }
}
__global__ void UnscaleCheckK(float* g, size_t n, float factor, int* nonfinite) {
  bool bad = false;
  MIRRORED_GRID_LOOP(i, n) {
    const float v = g[i];
    bad |= !isfinite(v);
    g[i] = v * factor;
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *nonfinite = 1;
}
// HWIO index (r, s, ci, co) <-> OIHW index (co, ci, r, s); kk = k * k.
__global__ void HwioToOihwK(const float* src, float* dst, int kk, int in, int out) {
  MIRRORED_GRID_LOOP(i, size_t(kk) * in * out) {
    size_t co = i % out, rest = i / out, ci = rest % in, rs = rest / in;
    dst[(co * in + ci) * kk + rs] = src[i];
  }
}
__global__ void OihwToHwioK(const float* src, float* dst, int kk, int in, int out) {
  MIRRORED_GRID_LOOP(i, size_t(kk) * in * out) {
    size_t co = i % out, rest = i / out, ci = rest % in, rs = rest / in;
    dst[i] = src[(co * in + ci) * kk + rs];
  }
}

// xp[p, i, j] = x[p, i - top, j - left] inside x, 0 outside; a thread per
// element of xp [planes, hp, wp].
__global__ void PadPlanesK(size_t total, int h, int w, const float* x, int top, int left, int hp, int wp,
                           float* xp) {
  MIRRORED_GRID_LOOP(i, total) {
    const int j = int(i % wp) - left, r = int(i / wp % hp) - top;
    const size_t p = i / (size_t(wp) * hp);
    xp[i] = r >= 0 && r < h && j >= 0 && j < w ? x[(p * h + r) * w + j] : 0.f;
  }
}
// x[p, i, j] = xp[p, i + top, j + left]; a thread per element of x.
__global__ void CropPlanesK(size_t total, int hp, int wp, const float* xp, int top, int left, int h, int w,
                            float* x) {
  MIRRORED_GRID_LOOP(i, total) {
    const size_t j = i % w, r = i / w % h, p = i / (size_t(w) * h);
    x[i] = xp[(p * hp + r + top) * wp + j + left];
  }
}

}  // namespace

void Relu(cudaStream_t s, const float* x, float* y, size_t n) {
  MIRRORED_CUDA_LAUNCH_CHECK((ReluK<<<Blocks(n), kThreads, 0, s>>>(x, y, n)));
}
void ReluMask(cudaStream_t s, const float* y, float* dy, size_t n) {
  MIRRORED_CUDA_LAUNCH_CHECK((ReluMaskK<<<Blocks(n), kThreads, 0, s>>>(y, dy, n)));
}
void AddRelu(cudaStream_t s, const float* a, const float* b, float* y, size_t n) {
  MIRRORED_CUDA_LAUNCH_CHECK((AddReluK<<<Blocks(n), kThreads, 0, s>>>(a, b, y, n)));
}
void Accumulate(cudaStream_t s, const float* src, float* dst, size_t n) {
  MIRRORED_CUDA_LAUNCH_CHECK((AccumulateK<<<Blocks(n), kThreads, 0, s>>>(src, dst, n)));
}
void Multiply(cudaStream_t s, const float* a, const float* b, float* y, size_t n) {
  if (n == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((MultiplyK<<<Blocks(n), kThreads, 0, s>>>(a, b, y, n)));
}
void ScaleShift(cudaStream_t s, const float* x, float scale, float offset, float* y, size_t n) {
  if (n == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((ScaleShiftK<<<Blocks(n), kThreads, 0, s>>>(x, scale, offset, y, n)));
}
void BiasAct(cudaStream_t s, float* y, const float* b, size_t outer, int c, size_t inner, bool relu) {
  const size_t n = outer * size_t(c) * inner;
  if (n == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((BiasActK<<<Blocks(n), kThreads, 0, s>>>(y, b, n, c, inner, relu)));
}
void GlobalAvgPool(cudaStream_t s, int n, int hw, int c, const float* x, float* y) {
  const size_t outputs = size_t(n) * c;
  if (outputs == 0 || hw <= 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((GapK<<<Blocks(outputs * 32), kThreads, 0, s>>>(outputs, hw, x, y)));
}
void GlobalAvgPoolBackward(cudaStream_t s, int n, int hw, int c, const float* dy, float* dx) {
  const size_t total = size_t(n) * c * hw;
  if (total == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((GapBackK<<<Blocks(total), kThreads, 0, s>>>(total, hw, dy, dx)));
}
void ChannelsFirstToLast(cudaStream_t s, int n, int hw, int c, const float* x, float* y) {
  const size_t total = size_t(n) * hw * c;
  if (total == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((ChannelsFirstToLastK<<<Blocks(total), kThreads, 0, s>>>(total, c, hw, x, y)));
}
void ChannelsLastToFirst(cudaStream_t s, int n, int hw, int c, const float* x, float* y) {
  const size_t total = size_t(n) * hw * c;
  if (total == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((ChannelsLastToFirstK<<<Blocks(total), kThreads, 0, s>>>(total, c, hw, x, y)));
}
void SoftmaxCrossEntropy(cudaStream_t s, int n, int classes, const float* logits, const float* labels, float* losses,
                         float* probs) {
  MIRRORED_CUDA_LAUNCH_CHECK((XentK<<<Blocks(size_t(n)), kThreads, 0, s>>>(n, classes, logits, labels, losses, probs)));
}
void SoftmaxCrossEntropyBackward(cudaStream_t s, int n, int classes, const float* probs, const float* labels,
                                 const float* weights, float* dlogits) {
  MIRRORED_CUDA_LAUNCH_CHECK(
      (XentBackK<<<Blocks(size_t(n) * classes), kThreads, 0, s>>>(n, classes, probs, labels, weights, dlogits)));
}
void Adam(cudaStream_t s, size_t n, float* p, const float* g, float* m, float* v, float lr_t, float beta1,
          float beta2, float epsilon) {
  MIRRORED_CUDA_LAUNCH_CHECK((AdamK<<<Blocks(n), kThreads, 0, s>>>(n, p, g, m, v, lr_t, beta1, beta2, epsilon)));
}
void SgdMomentum(cudaStream_t s, size_t n, float* p, const float* g, float* vel, float lr, float momentum) {
  MIRRORED_CUDA_LAUNCH_CHECK((SgdK<<<Blocks(n), kThreads, 0, s>>>(n, p, g, vel, lr, momentum)));
}
void UnscaleCheckFinite(cudaStream_t s, float* g, size_t n, float factor, int* nonfinite) {
  if (n == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK((UnscaleCheckK<<<Blocks(n), kThreads, 0, s>>>(g, n, factor, nonfinite)));
}
void HwioToOihw(cudaStream_t s, const float* src, float* dst, int k, int in, int out) {
  MIRRORED_CUDA_LAUNCH_CHECK(
      (HwioToOihwK<<<Blocks(size_t(k) * k * in * out), kThreads, 0, s>>>(src, dst, k * k, in, out)));
}
void OihwToHwio(cudaStream_t s, const float* src, float* dst, int k, int in, int out) {
  MIRRORED_CUDA_LAUNCH_CHECK(
      (OihwToHwioK<<<Blocks(size_t(k) * k * in * out), kThreads, 0, s>>>(src, dst, k * k, in, out)));
}

void PadPlanes(cudaStream_t s, size_t planes, int h, int w, const float* x, int top, int left, int hp, int wp,
               float* xp) {
  const size_t total = planes * size_t(hp) * wp;
  if (total == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK(
      (PadPlanesK<<<Blocks(total), kThreads, 0, s>>>(total, h, w, x, top, left, hp, wp, xp)));
}
void CropPlanes(cudaStream_t s, size_t planes, int hp, int wp, const float* xp, int top, int left, int h, int w,
                float* x) {
  const size_t total = planes * size_t(h) * w;
  if (total == 0) return;
  MIRRORED_CUDA_LAUNCH_CHECK(
      (CropPlanesK<<<Blocks(total), kThreads, 0, s>>>(total, hp, wp, xp, top, left, h, w, x)));
}

}  // namespace mirrored::model::gpu
