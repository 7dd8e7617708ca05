// Small CUDA kernels for the GPU backend where no cuBLAS / cuDNN call fits:
// element-wise activations, bias, pooling, loss, optimizer updates and the
// layout changes (NCHW activations <-> NHWC, HWIO kernels <-> cuDNN's OIHW,
// explicit zero padding of images).
// All asynchronous on `stream`; every launch is checked
// (MIRRORED_CUDA_LAUNCH_CHECK). Per-channel sums (bias gradients) are in
// gpu_batch_norm.h.
//
//   gpu::Relu(stream, x, y, n);
//   gpu::Adam(stream, count, p, g, m, v, lr_t, 0.9f, 0.999f, 1e-7f);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mirrored::model::gpu {

void Relu(cudaStream_t s, const float* x, float* y, size_t n);
void ReluMask(cudaStream_t s, const float* y, float* dy, size_t n);
void AddRelu(cudaStream_t s, const float* a, const float* b, float* y, size_t n);
void Accumulate(cudaStream_t s, const float* src, float* dst, size_t n);
// y = a * b; y = x * scale + offset (in place allowed).
void Multiply(cudaStream_t s, const float* a, const float* b, float* y, size_t n);
void ScaleShift(cudaStream_t s, const float* x, float scale, float offset, float* y, size_t n);
// y[o, ch, i] = act(y[o, ch, i] + b[ch]) on y[outer, c, inner]: a dense
// layer's [n, units] is inner = 1, an NCHW activation outer = n, inner = hw.
void BiasAct(cudaStream_t s, float* y, const float* b, size_t outer, int c, size_t inner, bool relu);
// NCHW: y[n, c] = mean over hw of x[n, c, hw]; and its gradient.
void GlobalAvgPool(cudaStream_t s, int n, int hw, int c, const float* x, float* y);
void GlobalAvgPoolBackward(cudaStream_t s, int n, int hw, int c, const float* dy, float* dx);
void SoftmaxCrossEntropy(cudaStream_t s, int n, int classes, const float* logits, const float* labels, float* losses,
                         float* probs);
void SoftmaxCrossEntropyBackward(cudaStream_t s, int n, int classes, const float* probs, const float* labels,
                                 const float* weights, float* dlogits);
void Adam(cudaStream_t s, size_t n, float* p, const float* g, float* m, float* v, float lr_t, float beta1,
          float beta2, float epsilon);
void SgdMomentum(cudaStream_t s, size_t n, float* p, const float* g, float* vel, float lr, float momentum);
// g[i] *= factor; *nonfinite becomes 1 if any g[i] was an infinity or NaN
// (the caller zeroes it first).
void UnscaleCheckFinite(cudaStream_t s, float* g, size_t n, float factor, int* nonfinite);
// y[n, hw, c] = x[n, c, hw] (NCHW -> NHWC), and the reverse.
void ChannelsFirstToLast(cudaStream_t s, int n, int hw, int c, const float* x, float* y);
void ChannelsLastToFirst(cudaStream_t s, int n, int hw, int c, const float* x, float* y);
// [k, k, in, out] <-> [out, in, k, k] (cuDNN's KCRS for NCHW filters).
void HwioToOihw(cudaStream_t s, const float* src, float* dst, int k, int in, int out);
void OihwToHwio(cudaStream_t s, const float* src, float* dst, int k, int in, int out);
// Zero padding of `planes` h x w planes (NCHW: planes = n * c) into
// hp x wp ones, x's pixel (i, j) landing at (i + top, j + left); and the
// crop that takes it back out (x = xp's h x w window at (top, left)).
void PadPlanes(cudaStream_t s, size_t planes, int h, int w, const float* x, int top, int left, int hp, int wp,
               float* xp);
void CropPlanes(cudaStream_t s, size_t planes, int hp, int wp, const float* xp, int top, int left, int h, int w,
                float* x);

}  // namespace mirrored::model::gpu
