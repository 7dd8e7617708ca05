// The CPU implementation of Backend: host memory, oneDNN kernels for the
// layers (cpu_dnnl_kernels.h), plain loops for the element-wise work, the
// loss and the optimizer updates. One oneDNN engine and stream per instance.
// Its dense and convolution products compute in FP32, or in bf16 where the
// CPU has bf16 instructions (MakeCpuBackend(Precision::kBf16)).
//
//   std::unique_ptr<Backend> cpu = MakeCpuBackend();
//   float* x = cpu->Allocate(64 * 784);
//   cpu->Relu(x, x, 64 * 784);
#pragma once

#include "worker/model/backend.h"
#include "worker/model/cpu_dnnl_kernels.h"

namespace mirrored::model {

// Caps the threads oneDNN kernels use when called from the calling thread
// (an OpenMP per-thread setting): replica threads sharing a host's cores
// each take their share. 0 leaves the default (all cores).
void SetCpuThreadsForThisThread(int threads);

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  // kFp32 or kBf16: MakeCpuBackend(Precision) checks that the CPU can.
  explicit CpuBackend(Precision precision) { ctx_.precision = precision; }

  std::string name() const override { return "cpu"; }
  bool is_gpu() const override { return false; }
  bool channels_first() const override { return false; }
  void ChannelsFirstToLast(int n, int hw, int c, const float* x, float* y) override;
  void ChannelsLastToFirst(int n, int hw, int c, const float* x, float* y) override;

  float* Allocate(size_t count) override;
  void Free(float* p) override;
  void Upload(const float* host, float* device, size_t count) override;
  void Download(const float* device, float* host, size_t count) override;
  void Copy(const float* src, float* dst, size_t count) override;
  void Zero(float* p, size_t count) override;
  void Synchronize() override {}

  std::unique_ptr<DenseKernel> MakeDense(const DenseSpec& spec) override;
  std::unique_ptr<ConvKernel> MakeConv(const ConvSpec& spec) override;
  std::unique_ptr<PoolKernel> MakeMaxPool(const PoolSpec& spec) override;
  std::unique_ptr<PoolKernel> MakeAvgPool(const PoolSpec& spec) override;
  std::unique_ptr<BatchNormKernel> MakeBatchNorm(const BatchNormSpec& spec) override;

  void Relu(const float* x, float* y, size_t count) override;
  void ReluMask(const float* y, float* dy, size_t count) override;
  void AddRelu(const float* a, const float* b, float* y, size_t count) override;
  void Accumulate(const float* src, float* dst, size_t count) override;
  void Multiply(const float* a, const float* b, float* y, size_t count) override;
  void ScaleShift(const float* x, float scale, float offset, float* y, size_t count) override;
  void GlobalAvgPool(int n, int hw, int c, const float* x, float* y) override;
  void GlobalAvgPoolBackward(int n, int hw, int c, const float* dy, float* dx) override;
  void SoftmaxCrossEntropy(int n, int classes, const float* logits, const float* labels, float* losses,
                           float* probs) override;
  void SoftmaxCrossEntropyBackward(int n, int classes, const float* probs, const float* labels,
                                   const float* weights, float* dlogits) override;
  void AdamUpdate(size_t count, float* p, const float* g, float* m, float* v, float lr_t, float beta1, float beta2,
                  float epsilon) override;
  void SgdMomentumUpdate(size_t count, float* p, const float* g, float* vel, float lr, float momentum) override;
  bool UnscaleAndCheckFinite(float* g, size_t count, float factor) override;

 private:
  DnnlContext ctx_;
};

}  // namespace mirrored::model
