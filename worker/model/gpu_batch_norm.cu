#include "worker/model/gpu_batch_norm.h"

#include <cmath>

#include "worker/model/cuda_check.h"

namespace mirrored::model::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kLanes = 32;     // channels per block: a warp reads 32 neighbouring floats of a row
constexpr int kRowLanes = 8;   // rows per block pass
constexpr int kMaxRowBlocks = 256;

unsigned Blocks(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}

#define MIRRORED_GRID_LOOP(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(blockDim.x) * gridDim.x)

// Per-channel partial sums over a slice of the rows of x[rows, c]: block
// (kLanes channels x kRowLanes row lanes), blockIdx.y picks the slice. With
// `center`, the sum of (x - center[ch])^2; else the sum of x. One partial per
// (slice, channel), added up by SumPartials in a fixed order: deterministic.
__global__ void ChannelSumsK(const float* x, size_t rows, int c, const float* center, float* partial) {
  __shared__ float part[kRowLanes][kLanes + 1];
  const int ch = blockIdx.x * kLanes + threadIdx.x;
  float sum = 0.f;
  if (ch < c) {
    const float m = center != nullptr ? center[ch] : 0.f;
    for (size_t r = blockIdx.y * size_t(kRowLanes) + threadIdx.y; r < rows; r += size_t(gridDim.y) * kRowLanes) {
      const float v = x[r * c + ch];
      sum += center != nullptr ? (v - m) * (v - m) : v;
    }
  }
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    for (int j = 1; j < kRowLanes; ++j) sum += part[j][threadIdx.x];
    partial[blockIdx.y * size_t(c) + ch] = sum;
  }
}

// The two sums of the backward pass: sum dy and sum dy * (x - mean).
__global__ void BackwardSumsK(const float* x, const float* dy, size_t rows, int c, const float* mean,
                              float* partial_dy, float* partial_dyx) {
  __shared__ float part[2][kRowLanes][kLanes + 1];
  const int ch = blockIdx.x * kLanes + threadIdx.x;
  float s_dy = 0.f, s_dyx = 0.f;
  if (ch < c) {
    const float m = mean[ch];
    for (size_t r = blockIdx.y * size_t(kRowLanes) + threadIdx.y; r < rows; r += size_t(gridDim.y) * kRowLanes) {
      const float g = dy[r * c + ch];
      s_dy += g;
      s_dyx += g * (x[r * c + ch] - m);
    }
  }
  part[0][threadIdx.y][threadIdx.x] = s_dy;
  part[1][threadIdx.y][threadIdx.x] = s_dyx;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    for (int j = 1; j < kRowLanes; ++j) s_dy += part[0][j][threadIdx.x], s_dyx += part[1][j][threadIdx.x];
    partial_dy[blockIdx.y * size_t(c) + ch] = s_dy;
    partial_dyx[blockIdx.y * size_t(c) + ch] = s_dyx;
  }
}

// The same sums on NCHW tensors x[n, c, hw] with hw > 1: block (channel,
// slice) adds a contiguous run of the channel's n * hw values (t = image *
// hw + pixel), so neighbouring threads read neighbouring floats; a tree in
// shared memory, in a fixed order, gives one partial per (slice, channel).
__device__ float BlockSum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

__global__ void PlaneSumsK(const float* x, int c, size_t hw, size_t count, size_t chunk, const float* center,
                           float* partial) {
  __shared__ float shared[kThreads];
  const int ch = blockIdx.x;
  const float m = center != nullptr ? center[ch] : 0.f;
  const size_t begin = blockIdx.y * chunk, end = begin + chunk < count ? begin + chunk : count;
  float sum = 0.f;
  for (size_t t = begin + threadIdx.x; t < end; t += kThreads) {
    const size_t image = t / hw;
    const float v = x[(image * c + ch) * hw + (t - image * hw)];
    sum += center != nullptr ? (v - m) * (v - m) : v;
  }
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.y * size_t(c) + ch] = sum;
}

__global__ void PlaneBackwardSumsK(const float* x, const float* dy, int c, size_t hw, size_t count, size_t chunk,
                                   const float* mean, float* partial_dy, float* partial_dyx) {
  __shared__ float shared[kThreads];
  const int ch = blockIdx.x;
  const float m = mean[ch];
  const size_t begin = blockIdx.y * chunk, end = begin + chunk < count ? begin + chunk : count;
  float s_dy = 0.f, s_dyx = 0.f;
  for (size_t t = begin + threadIdx.x; t < end; t += kThreads) {
    const size_t image = t / hw;
    const size_t i = (image * c + ch) * hw + (t - image * hw);
    const float g = dy[i];
    s_dy += g;
    s_dyx += g * (x[i] - m);
  }
  s_dy = BlockSum(s_dy, shared);
  __syncthreads();  // every thread has read shared[0] before it is reused
  s_dyx = BlockSum(s_dyx, shared);
  if (threadIdx.x == 0) {
    partial_dy[blockIdx.y * size_t(c) + ch] = s_dy;
    partial_dyx[blockIdx.y * size_t(c) + ch] = s_dyx;
  }
}

__device__ double SumPartials(const float* partial, int slices, int c, int ch) {
  double s = 0;
  for (int b = 0; b < slices; ++b) s += partial[size_t(b) * c + ch];
  return s;
}

__global__ void MeanK(const float* partial, int slices, int c, size_t rows, float* mean) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch < c) mean[ch] = float(SumPartials(partial, slices, c, ch) / double(rows));
}

// Biased variance normalises; the moving variance gets the unbiased one.
__global__ void VarianceK(const float* partial, int slices, int c, size_t rows, float epsilon, float momentum,
                          const float* mean, float* inv_std, float* moving_mean, float* moving_var) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double var = SumPartials(partial, slices, c, ch) / double(rows);
  inv_std[ch] = float(1.0 / sqrt(var + double(epsilon)));
  const float bessel = rows > 1 ? float(double(rows) / double(rows - 1)) : 1.f;
  moving_mean[ch] = momentum * moving_mean[ch] + (1.f - momentum) * mean[ch];
  moving_var[ch] = momentum * moving_var[ch] + (1.f - momentum) * float(var) * bessel;
}

// dbeta = sum dy; dgamma = sum dy * xhat; and the coefficients of
// dx = gamma * inv_std * (dy - mean(dy) - (x - mean) * inv_std * dgamma / rows).
__global__ void BackwardFinishK(const float* partial_dy, const float* partial_dyx, int slices, int c, size_t rows,
                                const float* gamma, const float* inv_std, float* dgamma, float* dbeta, float* coef) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double s_dy = SumPartials(partial_dy, slices, c, ch);
  const double s_dyxhat = SumPartials(partial_dyx, slices, c, ch) * double(inv_std[ch]);
  dbeta[ch] = float(s_dy);
  dgamma[ch] = float(s_dyxhat);
  coef[ch] = gamma[ch] * inv_std[ch];                                     // k1
  coef[c + ch] = float(s_dy / double(rows));                              // mean dy
  coef[2 * c + ch] = float(double(inv_std[ch]) * s_dyxhat / double(rows));  // k2
}

__global__ void NormalizeK(size_t n, int c, size_t hw, const float* x, const float* mean, const float* inv_std,
                           const float* gamma, const float* beta, float* y) {
  MIRRORED_GRID_LOOP(i, n) {
    const int ch = int((i / hw) % c);
    y[i] = (x[i] - mean[ch]) * (inv_std[ch] * gamma[ch]) + beta[ch];
  }
}

__global__ void InferenceK(size_t n, int c, size_t hw, const float* x, const float* moving_mean,
                           const float* moving_var, float epsilon, const float* gamma, const float* beta, float* y) {
  MIRRORED_GRID_LOOP(i, n) {
    const int ch = int((i / hw) % c);
    y[i] = (x[i] - moving_mean[ch]) * (gamma[ch] / sqrtf(moving_var[ch] + epsilon)) + beta[ch];  // as the CPU
  }
}

__global__ void DxK(size_t n, int c, size_t hw, const float* x, const float* dy, const float* mean, const float* coef,
                    float* dx) {
  MIRRORED_GRID_LOOP(i, n) {
    const int ch = int((i / hw) % c);
    dx[i] = coef[ch] * (dy[i] - coef[c + ch] - (x[i] - mean[ch]) * coef[2 * c + ch]);
  }
}

dim3 SumGrid(size_t rows, int c) {
  // At least ~8 rows per thread; at most kMaxRowBlocks slices.
  size_t slices = (rows + kRowLanes * 8 - 1) / (kRowLanes * 8);
  if (slices > kMaxRowBlocks) slices = kMaxRowBlocks;
  if (slices == 0) slices = 1;
  return dim3(unsigned((c + kLanes - 1) / kLanes), unsigned(slices));
}

// How the per-channel sums of x[n, c, hw] are split: with hw == 1 (a [n, c]
// matrix) the lane kernels, which read a row's neighbouring channels; else
// the plane kernels, `slices` runs of `chunk` values per channel (runs of
// 16 values per thread where there are enough, at most kMaxRowBlocks).
struct Split {
  Split(size_t n, int c, size_t hw) : n(n), c(c), hw(hw), count(n * hw) {
    if (hw == 1) {
      grid = SumGrid(n, c);
      slices = int(grid.y);
      return;
    }
    size_t s = (count + kThreads * 16 - 1) / (kThreads * 16);
    s = s < 1 ? 1 : (s > kMaxRowBlocks ? kMaxRowBlocks : s);
    chunk = (count + s - 1) / s;
    slices = int((count + chunk - 1) / chunk);
    grid = dim3(unsigned(c), unsigned(slices));  // channels in x: no 65535 limit
  }

  void Sums(cudaStream_t s, const float* x, const float* center, float* partial) const {
    if (hw == 1) {
      MIRRORED_CUDA_LAUNCH_CHECK((ChannelSumsK<<<grid, dim3(kLanes, kRowLanes), 0, s>>>(x, n, c, center, partial)));
    } else {
      MIRRORED_CUDA_LAUNCH_CHECK((PlaneSumsK<<<grid, kThreads, 0, s>>>(x, c, hw, count, chunk, center, partial)));
    }
  }

  void BackwardSums(cudaStream_t s, const float* x, const float* dy, const float* mean, float* partial_dy,
                    float* partial_dyx) const {
    if (hw == 1) {
      MIRRORED_CUDA_LAUNCH_CHECK((BackwardSumsK<<<grid, dim3(kLanes, kRowLanes), 0, s>>>(x, dy, n, c, mean,
                                                                                         partial_dy, partial_dyx)));
    } else {
      MIRRORED_CUDA_LAUNCH_CHECK((PlaneBackwardSumsK<<<grid, kThreads, 0, s>>>(x, dy, c, hw, count, chunk, mean,
                                                                               partial_dy, partial_dyx)));
    }
  }

  size_t n;
  int c;
  size_t hw, count, chunk = 0;
  dim3 grid;
  int slices = 1;
};

__global__ void CopySumsK(const float* partial, int slices, int c, float* out) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch < c) out[ch] = float(SumPartials(partial, slices, c, ch));
}

}  // namespace

size_t BatchNormScratchFloats(int channels) { return size_t(channels) * (2 * kMaxRowBlocks + 5); }

void BatchNormTrainingForward(cudaStream_t s, size_t n, int c, size_t hw, const float* x, const float* gamma,
                              const float* beta, float epsilon, float momentum, float* moving_mean,
                              float* moving_var, float* y, float* scratch) {
  if (n == 0 || hw == 0 || c <= 0) return;
  const size_t cs = size_t(c);
  float* partial = scratch;                        // [slices, c]
  float* mean = scratch + 2 * kMaxRowBlocks * cs;  // [c]
  float* inv_std = mean + cs;                      // [c]
  const Split split(n, c, hw);
  const size_t rows = split.count;  // values per channel
  const unsigned per_channel = unsigned((c + kThreads - 1) / kThreads);
  split.Sums(s, x, nullptr, partial);
  MIRRORED_CUDA_LAUNCH_CHECK((MeanK<<<per_channel, kThreads, 0, s>>>(partial, split.slices, c, rows, mean)));
  // Two passes (mean, then the centred squares), as the CPU's oneDNN: no
  // E[x^2] - E[x]^2 cancellation.
  split.Sums(s, x, mean, partial);
  MIRRORED_CUDA_LAUNCH_CHECK((VarianceK<<<per_channel, kThreads, 0, s>>>(partial, split.slices, c, rows, epsilon,
                                                                         momentum, mean, inv_std, moving_mean,
                                                                         moving_var)));
  const size_t total = rows * cs;
  MIRRORED_CUDA_LAUNCH_CHECK(
      (NormalizeK<<<Blocks(total), kThreads, 0, s>>>(total, c, hw, x, mean, inv_std, gamma, beta, y)));
}

void BatchNormInferenceForward(cudaStream_t s, size_t n, int c, size_t hw, const float* x, const float* gamma,
                               const float* beta, const float* moving_mean, const float* moving_var, float epsilon,
                               float* y) {
  if (n == 0 || hw == 0 || c <= 0) return;
  const size_t total = n * hw * size_t(c);
  MIRRORED_CUDA_LAUNCH_CHECK((InferenceK<<<Blocks(total), kThreads, 0, s>>>(total, c, hw, x, moving_mean,
                                                                            moving_var, epsilon, gamma, beta, y)));
}

void BatchNormBackward(cudaStream_t s, size_t n, int c, size_t hw, const float* x, const float* dy,
                       const float* gamma, float* dx, float* dgamma, float* dbeta, float* scratch) {
  if (c <= 0) return;
  const size_t cs = size_t(c);
  if (n == 0 || hw == 0) {  // no examples: no gradient
    MIRRORED_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, cs * sizeof(float), s));
    MIRRORED_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, cs * sizeof(float), s));
    return;
  }
  float* partial_dy = scratch;
  float* partial_dyx = scratch + kMaxRowBlocks * cs;
  const float* mean = scratch + 2 * kMaxRowBlocks * cs;  // kept by the training forward
  const float* inv_std = mean + cs;
  float* coef = scratch + (2 * kMaxRowBlocks + 2) * cs;  // [3, c]
  const Split split(n, c, hw);
  const size_t rows = split.count;
  const unsigned per_channel = unsigned((c + kThreads - 1) / kThreads);
  split.BackwardSums(s, x, dy, mean, partial_dy, partial_dyx);
  MIRRORED_CUDA_LAUNCH_CHECK((BackwardFinishK<<<per_channel, kThreads, 0, s>>>(
      partial_dy, partial_dyx, split.slices, c, rows, gamma, inv_std, dgamma, dbeta, coef)));
  if (dx != nullptr) {
    const size_t total = rows * cs;
    MIRRORED_CUDA_LAUNCH_CHECK((DxK<<<Blocks(total), kThreads, 0, s>>>(total, c, hw, x, dy, mean, coef, dx)));
  }
}

size_t ChannelSumsScratchFloats(int channels) { return size_t(channels) * kMaxRowBlocks; }

void ChannelSums(cudaStream_t s, size_t n, int c, size_t hw, const float* x, float* out, float* scratch) {
  if (c <= 0) return;
  if (n == 0 || hw == 0) {
    MIRRORED_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(c) * sizeof(float), s));
    return;
  }
  const Split split(n, c, hw);
  split.Sums(s, x, nullptr, scratch);
  MIRRORED_CUDA_LAUNCH_CHECK(
      (CopySumsK<<<unsigned((c + kThreads - 1) / kThreads), kThreads, 0, s>>>(scratch, split.slices, c, out)));
}

}  // namespace mirrored::model::gpu
