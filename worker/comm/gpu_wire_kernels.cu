#include "worker/comm/gpu_wire_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace mirrored {
namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 65535u * 8;  // grid-stride beyond

__device__ inline float Widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float Widen(__half v) { return __half2float(v); }
__device__ inline void Narrow(float v, __nv_bfloat16* out) { *out = __float2bfloat16_rn(v); }
__device__ inline void Narrow(float v, __half* out) { *out = __float2half_rn(v); }

template <typename T>
__global__ void NarrowK(const float* src, T* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(blockDim.x) * gridDim.x)
    Narrow(src[i], dst + i);
}

template <typename T>
__global__ void WidenK(const T* src, float* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(blockDim.x) * gridDim.x)
    dst[i] = Widen(src[i]);
}

unsigned Blocks(size_t n) { return unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, kMaxBlocks)); }

}  // namespace

cudaError_t NarrowOnDevice(cudaStream_t stream, bool bf16, const float* src, void* dst, size_t n) {
  if (n == 0) return cudaSuccess;
  if (bf16) {
    NarrowK<<<Blocks(n), kThreads, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
  } else {
    NarrowK<<<Blocks(n), kThreads, 0, stream>>>(src, static_cast<__half*>(dst), n);
  }
  return cudaGetLastError();
}

cudaError_t WidenOnDevice(cudaStream_t stream, bool bf16, const void* src, float* dst, size_t n) {
  if (n == 0) return cudaSuccess;
  if (bf16) {
    WidenK<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), dst, n);
  } else {
    WidenK<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
  }
  return cudaGetLastError();
}

}  // namespace mirrored
