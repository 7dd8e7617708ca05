// cuDNN / cuBLAS implementations of the per-layer kernels of backend.h:
// dense (cuBLAS SGEMM + bias/ReLU kernel), convolution (cuDNN on NCHW with
// KCRS filters transposed from our HWIO each step; padding that differs
// before and after through gpu_padded_input_conv.h), max pooling (cuDNN) and
// batch normalisation (our NCHW kernels, gpu_batch_norm.h). The context's
// precision (precision.h) picks the products' arithmetic: FP32 (no TF32),
// TF32 math mode, or bf16 / fp16 tensor-core products of 16-bit copies of
// the operands (converted by the kernels, gpu_half_kernels.h) accumulated
// and returned in FP32; pooling and batch norm are FP32 in every mode.
// Only built with MIRRORED_WITH_CUDA.
//
//   GpuContext ctx(/*ordinal=*/0, Precision::kFp32);
//   std::unique_ptr<ConvKernel> k = MakeCudnnConv(&ctx, spec);
//   k->Forward(n, x, w, b, y);   // asynchronous on ctx.stream
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>

#include "worker/model/backend.h"
#include "worker/model/precision.h"

namespace mirrored::model {

// The device, stream and library handles of one GpuBackend, plus one
// workspace shared by its kernels (they run in order on one stream).
class GpuContext {
 public:
  GpuContext(int ordinal, Precision precision);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int ordinal() const { return ordinal_; }
  Precision precision() const { return precision_; }
  bool allow_tf32() const { return precision_ == Precision::kTf32; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  // At least `bytes` of scratch, valid until the next call.
  void* Workspace(size_t bytes);

 private:
  void Release();

  int ordinal_;
  Precision precision_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

std::unique_ptr<DenseKernel> MakeCublasDense(GpuContext* ctx, const DenseSpec& spec);
std::unique_ptr<ConvKernel> MakeCudnnConv(GpuContext* ctx, const ConvSpec& spec);
std::unique_ptr<PoolKernel> MakeCudnnMaxPool(GpuContext* ctx, const PoolSpec& spec);
std::unique_ptr<PoolKernel> MakeCudnnAvgPool(GpuContext* ctx, const PoolSpec& spec);
std::unique_ptr<BatchNormKernel> MakeGpuBatchNorm(GpuContext* ctx, const BatchNormSpec& spec);

}  // namespace mirrored::model
