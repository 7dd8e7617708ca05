// Spatial batch normalisation on NCHW float tensors x[n, c, hw] (the GPU
// backend's activation layout; hw == 1 is a [n, c] matrix), as CUDA
// kernels: the statistics of each channel over its n * hw values. cuDNN's
// NHWC FP32 batch norm took 17 ms of a 22 ms resnet step at batch 256 on an
// H100 and its NCHW one 1.5 ms (bench/gpu/cudnn_layout_bench); these read
// each tensor the fewest times a two-pass variance allows and reduce in a
// fixed order (deterministic). Semantics as the CPU's oneDNN kernel: biased
// variance normalises, the moving variance gets the unbiased one, moving =
// momentum * moving + (1 - momentum) * batch.
//
//   // scratch: BatchNormScratchFloats(c) device floats, one per layer
//   gpu::BatchNormTrainingForward(stream, n, c, hw, x, gamma, beta, 1e-3f, 0.99f, mm, mv, y, scratch);
//   gpu::BatchNormBackward(stream, n, c, hw, x, dy, gamma, dx, dgamma, dbeta, scratch);  // same x, same scratch
//   gpu::ChannelSums(stream, n, c, hw, dy, db, sums_scratch);  // a convolution's bias gradient
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mirrored::model::gpu {

// Device floats one layer's scratch needs: partial sums, and the batch mean
// and inverse standard deviation the training forward keeps for the backward.
size_t BatchNormScratchFloats(int channels);

void BatchNormTrainingForward(cudaStream_t s, size_t n, int c, size_t hw, const float* x, const float* gamma,
                              const float* beta, float epsilon, float momentum, float* moving_mean,
                              float* moving_var, float* y, float* scratch);
void BatchNormInferenceForward(cudaStream_t s, size_t n, int c, size_t hw, const float* x, const float* gamma,
                               const float* beta, const float* moving_mean, const float* moving_var, float epsilon,
                               float* y);
// dx may be null (no input gradient wanted); dx may alias dy. With no rows
// the forward does nothing and the backward zeroes dgamma and dbeta.
void BatchNormBackward(cudaStream_t s, size_t n, int c, size_t hw, const float* x, const float* dy,
                       const float* gamma, float* dx, float* dgamma, float* dbeta, float* scratch);

// out[ch] = the sum of x[n, ch, hw] over n and hw, in a fixed order; scratch
// holds ChannelSumsScratchFloats(c) device floats. With no values, zeros.
size_t ChannelSumsScratchFloats(int channels);
void ChannelSums(cudaStream_t s, size_t n, int c, size_t hw, const float* x, float* out, float* scratch);

}  // namespace mirrored::model::gpu
