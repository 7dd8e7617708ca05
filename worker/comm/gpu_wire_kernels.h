// The device side of a 16-bit gradient all-reduce (NcclCommunicator::
// AllReduceAs): FP32 gradients narrowed into the 16-bit buffer NCCL
// reduces, and the result widened back. Round to nearest even (CUDA's
// __float2bfloat16_rn / __float2half_rn), as the CPU transports do.
// Asynchronous on `stream`; each returns the launch's error.
//
//   MIRRORED_CUDA_RETURN_IF_ERROR(NarrowOnDevice(stream, /*bf16=*/true, grads, wire, n));
//   ... ncclAllReduce(wire, wire, n, ncclBfloat16, ...) ...
//   MIRRORED_CUDA_RETURN_IF_ERROR(WidenOnDevice(stream, /*bf16=*/true, wire, grads, n));
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mirrored {

// dst[i] = bf16 (or fp16) of src[i].
cudaError_t NarrowOnDevice(cudaStream_t stream, bool bf16, const float* src, void* dst, size_t n);
// dst[i] = float(src[i]).
cudaError_t WidenOnDevice(cudaStream_t stream, bool bf16, const void* src, float* dst, size_t n);

}  // namespace mirrored
