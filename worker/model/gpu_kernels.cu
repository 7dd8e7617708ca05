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
__global__ void BiasActK(float* y, const float* b, size_t n, int cols, bool relu) {
  MIRRORED_GRID_LOOP(i, n) {
    float v = y[i] + b[i % cols];
    y[i] = relu ? fmaxf(v, 0.f) : v;
  }
}
// Block (32 columns x 8 row lanes); partial sums reduced in shared memory,
// then one atomicAdd per column per block.
__global__ void ColumnSumsK(const float* x, size_t rows, int cols, float* out) {
  __shared__ float part[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.f;
  if (c < cols)
    for (size_t r = blockIdx.y * 8 + threadIdx.y; r < rows; r += size_t(gridDim.y) * 8) sum += x[r * cols + c];
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int j = 1; j < 8; ++j) sum += part[j][threadIdx.x];
    atomicAdd(out + c, sum);
  }
}
__global__ void GapK(int n, int hw, int c, const float* x, float* y) {
  MIRRORED_GRID_LOOP(i, size_t(n) * c) {
    size_t b = i / c, ch = i % c;
    float s = 0.f;
    for (int p = 0; p < hw; ++p) s += x[(b * hw + p) * c + ch];
    y[i] = s / float(hw);
  }
}
__global__ void GapBackK(int n, int hw, int c, const float* dy, float* dx) {
  MIRRORED_GRID_LOOP(i, size_t(n) * hw * c) {
    size_t ch = i % c, b = i / (size_t(hw) * c);
    dx[i] = dy[b * c + ch] / float(hw);
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
// HWIO index (r, s, ci, co) <-> OHWI index (co, r, s, ci); kk = k * k.
__global__ void HwioToOhwiK(const float* src, float* dst, int kk, int in, int out) {
  MIRRORED_GRID_LOOP(i, size_t(kk) * in * out) {
    size_t co = i % out, rest = i / out, ci = rest % in, rs = rest / in;
    dst[(co * kk + rs) * in + ci] = src[i];
  }
}
__global__ void OhwiToHwioK(const float* src, float* dst, int kk, int in, int out) {
  MIRRORED_GRID_LOOP(i, size_t(kk) * in * out) {
    size_t co = i % out, rest = i / out, ci = rest % in, rs = rest / in;
    dst[i] = src[(co * kk + rs) * in + ci];
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
void BiasAct(cudaStream_t s, float* y, const float* b, size_t rows, int cols, bool relu) {
  size_t n = rows * size_t(cols);
  MIRRORED_CUDA_LAUNCH_CHECK((BiasActK<<<Blocks(n), kThreads, 0, s>>>(y, b, n, cols, relu)));
}
void ColumnSums(cudaStream_t s, const float* x, size_t rows, int cols, float* out) {
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(float) * size_t(cols), s));
  size_t row_blocks = (rows + 63) / 64;
  dim3 grid(unsigned((cols + 31) / 32), unsigned(row_blocks < 1024 ? (row_blocks == 0 ? 1 : row_blocks) : 1024));
  MIRRORED_CUDA_LAUNCH_CHECK((ColumnSumsK<<<grid, dim3(32, 8), 0, s>>>(x, rows, cols, out)));
}
void GlobalAvgPool(cudaStream_t s, int n, int hw, int c, const float* x, float* y) {
  MIRRORED_CUDA_LAUNCH_CHECK((GapK<<<Blocks(size_t(n) * c), kThreads, 0, s>>>(n, hw, c, x, y)));
}
void GlobalAvgPoolBackward(cudaStream_t s, int n, int hw, int c, const float* dy, float* dx) {
  MIRRORED_CUDA_LAUNCH_CHECK((GapBackK<<<Blocks(size_t(n) * hw * c), kThreads, 0, s>>>(n, hw, c, dy, dx)));
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
void HwioToOhwi(cudaStream_t s, const float* src, float* dst, int k, int in, int out) {
  MIRRORED_CUDA_LAUNCH_CHECK(
      (HwioToOhwiK<<<Blocks(size_t(k) * k * in * out), kThreads, 0, s>>>(src, dst, k * k, in, out)));
}
void OhwiToHwio(cudaStream_t s, const float* src, float* dst, int k, int in, int out) {
  MIRRORED_CUDA_LAUNCH_CHECK(
      (OhwiToHwioK<<<Blocks(size_t(k) * k * in * out), kThreads, 0, s>>>(src, dst, k * k, in, out)));
}

}  // namespace mirrored::model::gpu
