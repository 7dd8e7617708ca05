// The GPU implementation of Backend on one CUDA device: cudaMalloc'd
// memory, cuDNN / cuBLAS kernels (gpu_cudnn_kernels.h) and small CUDA
// kernels (gpu_kernels.h), all in order on the backend's own stream, so
// the host only waits in Download and Synchronize. Create and use it from
// the replica thread bound to that device. Only with MIRRORED_WITH_CUDA.
//
//   StatusOr<std::unique_ptr<Backend>> gpu = MakeGpuBackend(0);
//   float* p = (*gpu)->Allocate(1 << 20);
//   (*gpu)->Synchronize();
#pragma once

#include "worker/model/backend.h"
#include "worker/model/gpu_cudnn_kernels.h"

namespace mirrored::model {

class GpuBackend final : public Backend {
 public:
  // Throws CudaError when the device or a library handle cannot be set up.
  GpuBackend(int ordinal, Precision precision);
  ~GpuBackend() override;

  std::string name() const override { return "gpu:" + std::to_string(ctx_.ordinal()); }
  bool is_gpu() const override { return true; }
  bool channels_first() const override { return true; }
  void ChannelsFirstToLast(int n, int hw, int c, const float* x, float* y) override;
  void ChannelsLastToFirst(int n, int hw, int c, const float* x, float* y) override;
  cudaStream_t stream() const { return ctx_.stream(); }

  float* Allocate(size_t count) override;
  void Free(float* p) override;
  void Upload(const float* host, float* device, size_t count) override;
  void Download(const float* device, float* host, size_t count) override;
  void Copy(const float* src, float* dst, size_t count) override;
  void Zero(float* p, size_t count) override;
  void Synchronize() override;

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
  GpuContext ctx_;
  int* nonfinite_ = nullptr;  // UnscaleAndCheckFinite's device flag
  int* nonfinite_host_ = nullptr;  // pinned
};

}  // namespace mirrored::model
