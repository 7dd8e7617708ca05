// The device seam of the model layer: memory, element-wise ops, the loss,
// optimizer updates, and factories for the per-layer kernels (dense, conv,
// pooling, batch norm) that hold cached library state (oneDNN primitives on
// the CPU, cuDNN descriptors on the GPU). Layers and models are written
// once against this interface; CpuBackend and GpuBackend implement it.
// A Backend is used by one thread at a time (one per model / replica): it
// owns its engine and stream, so two models never share mutable state.
//
//   std::unique_ptr<Backend> be = MakeCpuBackend();
//   float* p = be->Allocate(1024);  be->Upload(host, p, 1024);
//   ConvSpec spec{.in_h = 28, .in_w = 28, .in_c = 1, .out_c = 32, .kernel = 3, .stride = 2};
//   auto conv = be->MakeConv(spec.SamePadded());   // 14x14x32, padding 0 before, 1 after
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker/model/precision.h"

namespace mirrored::model {

// Fully connected: y[n, out] = act(x[n, in] . W[in, out] + b[out]).
struct DenseSpec {
  int in = 0;
  int out = 0;
  bool relu = false;
};

// Zeros added along one spatial axis of a window's input: `before` the
// first pixel (top / left) and `after` the last (bottom / right).
struct AxisPadding {
  int before = 0, after = 0;
  int total() const { return before + after; }
  bool symmetric() const { return before == after; }
  bool operator==(const AxisPadding&) const = default;
};

// Keras' (TensorFlow's) padding "same" along an axis of `in` pixels:
// out = ceil(in / stride), total = max((out - 1) * stride + window - in, 0),
// before = total / 2 (rounded down), after = the rest. It is k / 2 on both
// sides at stride 1 with an odd window; otherwise the odd pixel goes after
// (28 pixels, window 3, stride 2: 0 before, 1 after). "valid" is AxisPadding{}.
inline AxisPadding SamePadding(int in, int window, int stride) {
  const int out = (in + stride - 1) / stride;
  const int total = std::max((out - 1) * stride + window - in, 0);
  return {total / 2, total - total / 2};
}

// Output length of a window sliding over `in` pixels padded by `pad`:
// floor((in + pad.total() - window) / stride) + 1 (below 1 when the
// window does not fit).
inline int WindowOutputSize(int in, int window, int stride, AxisPadding pad) {
  const int span = in + pad.total() - window;
  return span < 0 ? 0 : span / stride + 1;
}

// 2-D convolution with HWIO kernels [k, k, in_c, out_c] on activations in
// the backend's layout (NHWC on the CPU, NCHW on the GPU; see channels_first).
// pad_h pads the top and bottom, pad_w the left and right: none is Keras'
// "valid", SamePadded() sets Keras' "same" (TensorFlow's rule, which may pad
// one more pixel after than before; kernels take either side as given).
struct ConvSpec {
  int in_h = 0, in_w = 0, in_c = 0;
  int out_c = 0;
  int kernel = 3;
  int stride = 1;
  bool bias = true;
  bool relu = false;
  AxisPadding pad_h{}, pad_w{};  // "{}": designated initializers may omit them (-Wmissing-field-initializers)
  int out_h() const { return WindowOutputSize(in_h, kernel, stride, pad_h); }
  int out_w() const { return WindowOutputSize(in_w, kernel, stride, pad_w); }
  bool padded() const { return pad_h.total() + pad_w.total() > 0; }
  bool symmetric() const { return pad_h.symmetric() && pad_w.symmetric(); }
  // Sets pad_h and pad_w to "same" (SamePadding) for the spec's input,
  // kernel and stride; returns *this.
  ConvSpec& SamePadded() {
    pad_h = SamePadding(in_h, kernel, stride);
    pad_w = SamePadding(in_w, kernel, stride);
    return *this;
  }
};

// Max or average pooling, window `size`, stride `stride`, no padding
// (Keras "valid").
struct PoolSpec {
  int in_h = 0, in_w = 0, channels = 0;
  int size = 2;
  int stride = 2;
  int out_h() const { return (in_h - size) / stride + 1; }
  int out_w() const { return (in_w - size) / stride + 1; }
};

// Batch normalisation over N, H, W for each of `channels` (backend's layout).
struct BatchNormSpec {
  int h = 1, w = 1, channels = 0;
  float epsilon = 1e-3f;   // Keras default
  float momentum = 0.99f;  // moving = momentum * moving + (1 - momentum) * batch
};

// Whether a convolution of `spec` computes in 16 bits under --precision
// bf16 / fp16: input channels a multiple of 8 (tensor cores want 8-channel
// granules); an image's first layer stays FP32, on either device.
inline bool ConvComputesIn16Bit(const ConvSpec& spec) { return spec.in_c % 8 == 0; }

// All pointers below are device pointers of the backend that made the kernel;
// `n` is the batch size of the call (kernels cache per batch size).
// A training Backward follows the Forward of the same n, x and w (the layer's
// own Forward of this micro-batch): 16-bit kernels reuse that Forward's
// 16-bit copies of x and w (the CPU's convert again when x is another).
class DenseKernel {
 public:
  virtual ~DenseKernel() = default;
  virtual void Forward(int n, const float* x, const float* w, const float* b, float* y) = 0;
  // `dy` is the gradient w.r.t. the pre-activation (the layer applies the
  // ReLU mask first). Overwrites dw, db, and dx unless dx is null.
  virtual void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) = 0;
};

class ConvKernel {
 public:
  virtual ~ConvKernel() = default;
  // `b` is ignored (may be null) when the spec has no bias.
  virtual void Forward(int n, const float* x, const float* w, const float* b, float* y) = 0;
  // As DenseKernel::Backward; db is ignored without bias.
  virtual void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) = 0;
};

class PoolKernel {
 public:
  virtual ~PoolKernel() = default;
  // With `training`, remembers what Backward needs (argmax workspace).
  virtual void Forward(int n, const float* x, float* y, bool training) = 0;
  // Valid after a training Forward with the same n, x and y.
  virtual void Backward(int n, const float* x, const float* y, const float* dy, float* dx) = 0;
  // For an x that a ReLU produced: asks Backward to apply that ReLU's
  // backward too (dx zero wherever x <= 0), so that the ReLU's own pass
  // over dx can be skipped. Returns false, changing nothing, where the
  // kernel cannot (average pooling; the GPU's).
  virtual bool FoldInputReluMask() { return false; }
};

class BatchNormKernel {
 public:
  virtual ~BatchNormKernel() = default;
  // Training: normalises with the batch statistics, keeps them for Backward
  // and updates moving_mean / moving_var (unbiased variance). Inference:
  // normalises with the moving statistics and updates nothing.
  virtual void Forward(int n, const float* x, const float* gamma, const float* beta, float* moving_mean,
                       float* moving_var, float* y, bool training) = 0;
  // Valid after a training Forward with the same n and x.
  virtual void Backward(int n, const float* x, const float* dy, const float* gamma, const float* beta, float* dx,
                        float* dgamma, float* dbeta) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "gpu:<ordinal>".
  virtual std::string name() const = 0;
  virtual bool is_gpu() const = 0;
  // How 4-D activations [n, h, w, c] lie in memory: false, NHWC (the CPU:
  // oneDNN's fastest); true, NCHW (the GPU: cuDNN's FP32 convolutions are
  // ~30% faster on it than on NHWC for these models). Shapes (Shape3 is h,
  // w, c), parameters (HWIO kernels) and checkpoints are the same either way;
  // only what flattens an activation (Flatten, Dense) and the model's input
  // reorder, through the two calls below.
  virtual bool channels_first() const = 0;
  // y[n, hw, c] = x[n, c, hw], and the reverse (x, y distinct).
  virtual void ChannelsFirstToLast(int n, int hw, int c, const float* x, float* y) = 0;
  virtual void ChannelsLastToFirst(int n, int hw, int c, const float* x, float* y) = 0;

  // Device memory in floats, zero-filled, 256-byte aligned.
  virtual float* Allocate(size_t count) = 0;
  virtual void Free(float* p) = 0;
  virtual void Upload(const float* host, float* device, size_t count) = 0;
  virtual void Download(const float* device, float* host, size_t count) = 0;
  virtual void Copy(const float* src, float* dst, size_t count) = 0;
  virtual void Zero(float* p, size_t count) = 0;
  // Waits until all work issued so far is complete (a no-op on the CPU).
  virtual void Synchronize() = 0;

  virtual std::unique_ptr<DenseKernel> MakeDense(const DenseSpec& spec) = 0;
  virtual std::unique_ptr<ConvKernel> MakeConv(const ConvSpec& spec) = 0;
  virtual std::unique_ptr<PoolKernel> MakeMaxPool(const PoolSpec& spec) = 0;
  // Average over each window (no padding: every window is full).
  virtual std::unique_ptr<PoolKernel> MakeAvgPool(const PoolSpec& spec) = 0;
  virtual std::unique_ptr<BatchNormKernel> MakeBatchNorm(const BatchNormSpec& spec) = 0;

  virtual void Relu(const float* x, float* y, size_t count) = 0;
  // dy[i] = 0 where y[i] <= 0 (y is the ReLU's output), in place.
  virtual void ReluMask(const float* y, float* dy, size_t count) = 0;
  // y = max(a + b, 0): the join of a residual block (y may be a).
  virtual void AddRelu(const float* a, const float* b, float* y, size_t count) = 0;
  // dst += src.
  virtual void Accumulate(const float* src, float* dst, size_t count) = 0;
  // y = a * b, element-wise (y may be a or b): Dropout's mask.
  virtual void Multiply(const float* a, const float* b, float* y, size_t count) = 0;
  // y = x * scale + offset (y may be x): Rescaling.
  virtual void ScaleShift(const float* x, float scale, float offset, float* y, size_t count) = 0;
  // y[n, c] = mean over hw of x[n, hw, c] (x[n, c, hw] when channels_first);
  // and its gradient.
  virtual void GlobalAvgPool(int n, int hw, int c, const float* x, float* y) = 0;
  virtual void GlobalAvgPoolBackward(int n, int hw, int c, const float* dy, float* dx) = 0;

  // Sparse softmax cross-entropy. labels are class ids stored as floats.
  // losses[i] = -log softmax(logits[i])[labels[i]]; probs = softmax(logits).
  virtual void SoftmaxCrossEntropy(int n, int classes, const float* logits, const float* labels, float* losses,
                                   float* probs) = 0;
  // dlogits[i] = weights[i] * (probs[i] - onehot(labels[i])): the gradient of
  // sum_i weights[i] * losses[i]; the caller picks the reduction by the weights.
  virtual void SoftmaxCrossEntropyBackward(int n, int classes, const float* probs, const float* labels,
                                           const float* weights, float* dlogits) = 0;

  // Adam (Keras form): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // p -= lr_t m / (sqrt(v) + eps), lr_t = lr sqrt(1-b2^t) / (1-b1^t).
  virtual void AdamUpdate(size_t count, float* p, const float* g, float* m, float* v, float lr_t, float beta1,
                          float beta2, float epsilon) = 0;
  // SGD with momentum (Keras form): vel = momentum vel - lr g; p += vel.
  virtual void SgdMomentumUpdate(size_t count, float* p, const float* g, float* vel, float lr, float momentum) = 0;

  // g *= factor, in place; returns whether every value of g was finite (no
  // infinity, no NaN): loss scaling's unscale and overflow check in one
  // pass (loss_scale.h). Waits for the result (a synchronisation on a GPU).
  virtual bool UnscaleAndCheckFinite(float* g, size_t count, float factor) = 0;
};

// The CPU backend; its dense and convolution products in FP32.
std::unique_ptr<Backend> MakeCpuBackend();
// The same, its products in `precision`: fp32, or bf16 on a CPU with
// AVX512_BF16 or AMX-BF16 that oneDNN uses. InvalidArgument naming what is
// missing otherwise (CheckCpuBackendPrecision).
StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(Precision precision);
// Whether the CPU backend can compute in `precision` here: CheckCpuPrecision
// (the CPU's CPUID), then for bf16 oneDNN's effective instruction set, which
// ONEDNN_MAX_CPU_ISA may cap below AVX512_BF16. InvalidArgument naming what
// is missing, rather than leaving oneDNN to fall back on its reference
// kernels for want of the instructions (which kernels it picks per shape
// is oneDNN's: the zoo's are AMX ones, bench/RESULTS.md).
Status CheckCpuBackendPrecision(Precision precision);
// The GPU backend on device `ordinal`, its products in `precision`.
// Unavailable when built without CUDA or when the device does not exist.
StatusOr<std::unique_ptr<Backend>> MakeGpuBackend(int ordinal, Precision precision = Precision::kFp32);
// Number of CUDA devices (0 without CUDA or without a driver).
int GpuDeviceCount();

}  // namespace mirrored::model
