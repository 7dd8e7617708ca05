// CUDA kernels between the FP32 activations of the GPU backend and the
// 16-bit copies its bf16 / fp16 products read and write (--precision,
// precision.h): plain conversion, and a tiled transpose that converts on
// the way (NCHW <-> NHWC activations, HWIO <-> KRSC filters), optionally
// adding a per-channel bias and a ReLU as it writes FP32. Asynchronous on
// `stream`; every launch is checked.
//
//   gpu::ToHalf(stream, HalfType::kBf16, w, w16, count);
//   gpu::TransposeToHalf(stream, HalfType::kBf16, n, c, hw, x, x16);            // NCHW f32 -> NHWC bf16
//   gpu::TransposeFromHalf(stream, HalfType::kBf16, n, hw, c, y16, y, b, true); // NHWC bf16 -> NCHW f32
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mirrored::model::gpu {

enum class HalfType { kBf16, kFp16 };

// dst[i] = src[i] rounded to the 16-bit type (to nearest even).
void ToHalf(cudaStream_t s, HalfType t, const float* src, void* dst, size_t n);
// out[b][c][r] = in[b][r][c] for b < batches, r < rows, c < cols: FP32 in,
// 16-bit out.
void TransposeToHalf(cudaStream_t s, HalfType t, size_t batches, int rows, int cols, const float* in, void* out);
// The same transpose, 16-bit in, FP32 out: out[b][c][r] = act(in[b][r][c] +
// bias[c]) (bias may be null; act is ReLU or the identity).
void TransposeFromHalf(cudaStream_t s, HalfType t, size_t batches, int rows, int cols, const void* in, float* out,
                       const float* bias, bool relu);

}  // namespace mirrored::model::gpu
