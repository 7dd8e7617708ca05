#include "worker/model/gpu_padded_input_conv.h"

#include <algorithm>

#include "worker/model/cuda_check.h"
#include "worker/model/gpu_kernels.h"

namespace mirrored::model {
namespace {

// FP32 device scratch, grown (never shrunk) by Reserve. Forward reserves
// what Backward uses: cudaFree synchronises the device, which must not
// happen while bucket all-reduces are in flight (Backward).
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  ~GrowingBuffer() { cudaFree(p_); }
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  float* Reserve(size_t floats) {
    if (floats > capacity_) {
      if (p_ != nullptr) MIRRORED_CUDA_CHECK(cudaFree(p_));
      p_ = nullptr;
      MIRRORED_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(floats, 1) * sizeof(float)));
      capacity_ = floats;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t capacity_ = 0;
};

class PaddedInputConv final : public ConvKernel {
 public:
  PaddedInputConv(GpuContext* ctx, const ConvSpec& s, std::unique_ptr<ConvKernel> inner)
      : ctx_(ctx), s_(s), inner_spec_(SymmetricPart(s)), inner_(std::move(inner)),
        top_(s.pad_h.before - inner_spec_.pad_h.before), left_(s.pad_w.before - inner_spec_.pad_w.before) {}

  void Forward(int n, const float* x, const float* w, const float* b, float* y) override {
    dxp_.Reserve(PaddedFloats(n));  // for Backward, which must not allocate
    inner_->Forward(n, Pad(n, x), w, b, y);
  }

  // The inner kernel's input gradient is for the padded copy; the spec's
  // input is its window at (top_, left_), so dx is that window: gradients
  // of the explicit zeros are dropped.
  void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    float* dxp = dx != nullptr ? dxp_.Reserve(PaddedFloats(n)) : nullptr;
    inner_->Backward(n, Pad(n, x), w, dy, dxp, dw, db);
    if (dx != nullptr) {
      gpu::CropPlanes(ctx_->stream(), size_t(n) * s_.in_c, inner_spec_.in_h, inner_spec_.in_w, dxp, top_, left_,
                      s_.in_h, s_.in_w, dx);
    }
  }

 private:
  size_t PaddedFloats(int n) const { return size_t(n) * s_.in_c * inner_spec_.in_h * inner_spec_.in_w; }

  // x copied into the padded image (again in Backward: the copy is cheap,
  // and the filter gradient then needs no promise that it is still there).
  const float* Pad(int n, const float* x) {
    float* xp = xp_.Reserve(PaddedFloats(n));
    gpu::PadPlanes(ctx_->stream(), size_t(n) * s_.in_c, s_.in_h, s_.in_w, x, top_, left_, inner_spec_.in_h,
                   inner_spec_.in_w, xp);
    return xp;
  }

  GpuContext* ctx_;
  ConvSpec s_, inner_spec_;
  std::unique_ptr<ConvKernel> inner_;
  int top_, left_;  // explicit zero rows above and columns left of x in the copy
  GrowingBuffer xp_, dxp_;
};

}  // namespace

ConvSpec SymmetricPart(const ConvSpec& spec) {
  ConvSpec inner = spec;
  const int h = std::min(spec.pad_h.before, spec.pad_h.after), w = std::min(spec.pad_w.before, spec.pad_w.after);
  inner.in_h = spec.in_h + spec.pad_h.total() - 2 * h;
  inner.in_w = spec.in_w + spec.pad_w.total() - 2 * w;
  inner.pad_h = {h, h};
  inner.pad_w = {w, w};
  return inner;
}

std::unique_ptr<ConvKernel> MakePaddedInputConv(GpuContext* ctx, const ConvSpec& spec,
                                                std::unique_ptr<ConvKernel> inner) {
  return std::make_unique<PaddedInputConv>(ctx, spec, std::move(inner));
}

}  // namespace mirrored::model
