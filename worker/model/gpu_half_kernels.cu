#include "worker/model/gpu_half_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "worker/model/cuda_check.h"

namespace mirrored::model::gpu {
namespace {

constexpr int kTile = 32;      // a 32 x 32 tile per block
constexpr int kTileRows = 8;   // rows of threads: each copies 4 of the tile's rows
constexpr unsigned kMaxGrid = 65535;

__device__ inline float ToFloat(float v) { return v; }
__device__ inline float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float ToFloat(__half v) { return __half2float(v); }

template <typename T>
__device__ inline T FromFloat(float v);
template <>
__device__ inline float FromFloat<float>(float v) { return v; }
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ inline __half FromFloat<__half>(float v) { return __float2half_rn(v); }

template <typename Out>
__global__ void ToHalfK(const float* src, Out* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(blockDim.x) * gridDim.x)
    dst[i] = FromFloat<Out>(src[i]);
}

// A tile is read along its rows (coalesced in `in`) into shared memory and
// written along its columns (coalesced in `out`); grid-stride over tiles
// and batches, so any size works with a capped grid.
template <typename In, typename Out>
__global__ void TransposeK(size_t batches, int rows, int cols, const In* in, Out* out, const float* bias,
                           bool relu) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
  const int tiles_x = (cols + kTile - 1) / kTile, tiles_y = (rows + kTile - 1) / kTile;
  const size_t plane = size_t(rows) * cols;
  for (size_t b = blockIdx.z; b < batches; b += gridDim.z) {
    for (int ty = blockIdx.y; ty < tiles_y; ty += gridDim.y) {
      for (int tx = blockIdx.x; tx < tiles_x; tx += gridDim.x) {
        const int r0 = ty * kTile, c0 = tx * kTile;
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int r = r0 + j, c = c0 + threadIdx.x;
          if (r < rows && c < cols) tile[j][threadIdx.x] = ToFloat(in[b * plane + size_t(r) * cols + c]);
        }
        __syncthreads();
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int c = c0 + j, r = r0 + threadIdx.x;
          if (r < rows && c < cols) {
            float v = tile[threadIdx.x][j];
            if (bias != nullptr) v += bias[c];
            if (relu) v = fmaxf(v, 0.f);
            out[b * plane + size_t(c) * rows + r] = FromFloat<Out>(v);
          }
        }
        __syncthreads();
      }
    }
  }
}

template <typename In, typename Out>
void LaunchTranspose(cudaStream_t s, size_t batches, int rows, int cols, const In* in, Out* out, const float* bias,
                     bool relu) {
  if (batches == 0 || rows <= 0 || cols <= 0) return;
  const dim3 grid(std::min<unsigned>((cols + kTile - 1) / kTile, kMaxGrid),
                  std::min<unsigned>((rows + kTile - 1) / kTile, kMaxGrid),
                  unsigned(std::min<size_t>(batches, kMaxGrid)));
  MIRRORED_CUDA_LAUNCH_CHECK(
      (TransposeK<In, Out><<<grid, dim3(kTile, kTileRows), 0, s>>>(batches, rows, cols, in, out, bias, relu)));
}

}  // namespace

void ToHalf(cudaStream_t s, HalfType t, const float* src, void* dst, size_t n) {
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<size_t>((n + 255) / 256, 65535 * 8));
  if (t == HalfType::kBf16) {
    MIRRORED_CUDA_LAUNCH_CHECK((ToHalfK<<<blocks, 256, 0, s>>>(src, static_cast<__nv_bfloat16*>(dst), n)));
  } else {
    MIRRORED_CUDA_LAUNCH_CHECK((ToHalfK<<<blocks, 256, 0, s>>>(src, static_cast<__half*>(dst), n)));
  }
}

void TransposeToHalf(cudaStream_t s, HalfType t, size_t batches, int rows, int cols, const float* in, void* out) {
  if (t == HalfType::kBf16) {
    LaunchTranspose(s, batches, rows, cols, in, static_cast<__nv_bfloat16*>(out), nullptr, false);
  } else {
    LaunchTranspose(s, batches, rows, cols, in, static_cast<__half*>(out), nullptr, false);
  }
}

void TransposeFromHalf(cudaStream_t s, HalfType t, size_t batches, int rows, int cols, const void* in, float* out,
                       const float* bias, bool relu) {
  if (t == HalfType::kBf16) {
    LaunchTranspose(s, batches, rows, cols, static_cast<const __nv_bfloat16*>(in), out, bias, relu);
  } else {
    LaunchTranspose(s, batches, rows, cols, static_cast<const __half*>(in), out, bias, relu);
  }
}

}  // namespace mirrored::model::gpu
