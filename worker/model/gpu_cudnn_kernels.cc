#include "worker/model/gpu_cudnn_kernels.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/logging.h"
#include "worker/model/cublas_library.h"
#include "worker/model/cuda_check.h"
#include "worker/model/gpu_batch_norm.h"
#include "worker/model/gpu_half_kernels.h"
#include "worker/model/gpu_kernels.h"
#include "worker/model/gpu_padded_input_conv.h"

namespace mirrored::model {
namespace {

const float kOne = 1.f, kZero = 0.f;

// A 4-D tensor descriptor, re-set when the batch size changes: FP32
// activations are NCHW (cuDNN's FP32 convolutions run ~30% faster on it
// than on NHWC for our shapes); the 16-bit copies of --precision bf16/fp16
// are NHWC, the layout of cuDNN's tensor-core kernels (NCHW would make it
// transpose internally, again).
class TensorDesc {
 public:
  TensorDesc() { MIRRORED_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  void Set(int n, int c, int h, int w, cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW,
           cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    MIRRORED_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_, format, type, n, c, h, w));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// Device memory owned by a kernel.
class Buffer {
 public:
  explicit Buffer(size_t floats) { MIRRORED_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(floats, 1) * sizeof(float))); }
  ~Buffer() { cudaFree(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* get() const { return p_; }

 private:
  float* p_ = nullptr;
};

// 16-bit values owned by a kernel, grown (never shrunk) by Reserve: only
// from Forward, since cudaFree synchronises the device, which must not
// happen while bucket all-reduces are in flight (Backward).
class HalfBuffer {
 public:
  HalfBuffer() = default;
  ~HalfBuffer() { cudaFree(p_); }
  HalfBuffer(const HalfBuffer&) = delete;
  HalfBuffer& operator=(const HalfBuffer&) = delete;
  void* Reserve(size_t values) {
    if (values > capacity_) {
      if (p_ != nullptr) MIRRORED_CUDA_CHECK(cudaFree(p_));
      p_ = nullptr;
      MIRRORED_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(values, 1) * 2));
      capacity_ = values;
    }
    return p_;
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  size_t capacity_ = 0;
};

// The 16-bit type of a context's products, when it has one.
std::optional<gpu::HalfType> HalfTypeOf(const GpuContext& ctx) {
  if (ctx.precision() == Precision::kBf16) return gpu::HalfType::kBf16;
  if (ctx.precision() == Precision::kFp16) return gpu::HalfType::kFp16;
  return std::nullopt;
}
cudaDataType_t CudaType(gpu::HalfType t) { return t == gpu::HalfType::kBf16 ? CUDA_R_16BF : CUDA_R_16F; }
cudnnDataType_t CudnnType(gpu::HalfType t) {
  return t == gpu::HalfType::kBf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

// ---------------------------------------------------------------- dense ----
// Row-major Y[n, out] = X[n, in] W[in, out] is column-major Y^T = W^T X^T,
// so every GEMM below is written in column-major terms on the same memory.
// 16-bit: X, W and dY are converted, the products accumulate in FP32 and
// are written FP32 (cublasGemmEx); Backward reuses Forward's X and W copies.
class CublasDense final : public DenseKernel {
 public:
  CublasDense(GpuContext* ctx, const DenseSpec& s)
      : ctx_(ctx), s_(s), half_(HalfTypeOf(*ctx)), bias_sums_(gpu::ChannelSumsScratchFloats(s.out)) {}

  void Forward(int n, const float* x, const float* w, const float* b, float* y) override {
    if (half_) {
      dy16_.Reserve(size_t(n) * s_.out);  // for Backward, which must not allocate
      gpu::ToHalf(ctx_->stream(), *half_, x, x16_.Reserve(size_t(n) * s_.in), size_t(n) * s_.in);
      gpu::ToHalf(ctx_->stream(), *half_, w, w16_.Reserve(size_t(s_.in) * s_.out), size_t(s_.in) * s_.out);
      Gemm(CUBLAS_OP_N, CUBLAS_OP_N, s_.out, n, s_.in, w16_.get(), s_.out, x16_.get(), s_.in, y, s_.out);
    } else {
      MIRRORED_CUBLAS_CHECK(CublasLibrary::Get().Sgemm(ctx_->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, s_.out, n, s_.in,
                                                       &kOne, w, s_.out, x, s_.in, &kZero, y, s_.out));
    }
    gpu::BiasAct(ctx_->stream(), y, b, size_t(n), s_.out, 1, s_.relu);
  }

  void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    if (half_) {
      gpu::ToHalf(ctx_->stream(), *half_, dy, dy16_.get(), size_t(n) * s_.out);
      // dX^T[in, n] = W[in, out] dY^T[out, n]; dW^T[out, in] = dY^T[out, n] X[n, in]
      if (dx != nullptr) {
        Gemm(CUBLAS_OP_T, CUBLAS_OP_N, s_.in, n, s_.out, w16_.get(), s_.out, dy16_.get(), s_.out, dx, s_.in);
      }
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, s_.out, s_.in, n, dy16_.get(), s_.out, x16_.get(), s_.in, dw, s_.out);
    } else {
      const CublasLibrary& cublas = CublasLibrary::Get();
      if (dx != nullptr) {
        MIRRORED_CUBLAS_CHECK(cublas.Sgemm(ctx_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, s_.in, n, s_.out, &kOne, w,
                                           s_.out, dy, s_.out, &kZero, dx, s_.in));
      }
      MIRRORED_CUBLAS_CHECK(cublas.Sgemm(ctx_->cublas(), CUBLAS_OP_N, CUBLAS_OP_T, s_.out, s_.in, n, &kOne, dy,
                                         s_.out, x, s_.in, &kZero, dw, s_.out));
    }
    gpu::ChannelSums(ctx_->stream(), size_t(n), s_.out, 1, dy, db, bias_sums_.get());  // fixed order
  }

 private:
  // C[m, n] (FP32) = op(A) op(B) of 16-bit A and B, FP32 accumulation.
  void Gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda, const void* b,
            int ldb, float* c, int ldc) {
    const cudaDataType_t t = CudaType(*half_);
    MIRRORED_CUBLAS_CHECK(CublasLibrary::Get().GemmEx(ctx_->cublas(), ta, tb, m, n, k, &kOne, a, t, lda, b, t, ldb,
                                                      &kZero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                                      CUBLAS_GEMM_DEFAULT));
  }

  GpuContext* ctx_;
  DenseSpec s_;
  std::optional<gpu::HalfType> half_;
  Buffer bias_sums_;
  HalfBuffer x16_, w16_, dy16_;
};

// ----------------------------------------------------------------- conv ----
// FP32: NCHW activations, KCRS filters transposed from HWIO each step.
// 16-bit: NHWC copies of the activations and KRSC copies of the filters,
// made by transposing kernels that convert on the way; the output goes back
// to NCHW FP32 with the bias and ReLU applied in the same pass. A layer
// whose input channels are not a multiple of 8 (the first convolution of a
// 1- or 3-channel image) stays FP32: tensor-core kernels want 8-channel
// granules, and such a layer is small and memory-bound.
class CudnnConv final : public ConvKernel {
 public:
  CudnnConv(GpuContext* ctx, const ConvSpec& s)
      : ctx_(ctx), s_(s), half_(ConvComputesIn16Bit(s) ? HalfTypeOf(*ctx) : std::nullopt),
        w_kcrs_(half_ ? 0 : size_t(s.kernel) * s.kernel * s.in_c * s.out_c),
        dw_kcrs_(half_ ? 0 : size_t(s.kernel) * s.kernel * s.in_c * s.out_c),
        bias_sums_(s.bias ? gpu::ChannelSumsScratchFloats(s.out_c) : 0) {
    // Both sides of an axis alike: MakeCudnnConv hands an asymmetric spec
    // to PaddedInputConv, which brings it here symmetric.
    if (!s.symmetric()) throw CudaError("CudnnConv takes symmetric padding only (see gpu_padded_input_conv.h)");
    const cudnnTensorFormat_t format = half_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    MIRRORED_CUDNN_CHECK(cudnnCreateFilterDescriptor(&filter_));
    MIRRORED_CUDNN_CHECK(cudnnSetFilter4dDescriptor(filter_, DataType(), format, s.out_c, s.in_c, s.kernel, s.kernel));
    MIRRORED_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    MIRRORED_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, s.pad_h.before, s.pad_w.before, s.stride, s.stride,
                                                         1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    const cudnnMathType_t math = half_ ? CUDNN_TENSOR_OP_MATH : ctx->allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    MIRRORED_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, math));
  }
  ~CudnnConv() override {
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(filter_);
  }

  void Forward(int n, const float* x, const float* w, const float* b, float* y) override {
    Algos& a = Prepare(n);
    const void* in = x;
    const void* filter = w_kcrs_.get();
    void* out = y;
    const int in_hw = s_.in_h * s_.in_w, out_hw = s_.out_h() * s_.out_w(), kkc = s_.kernel * s_.kernel * s_.in_c;
    if (half_) {  // NCHW f32 -> NHWC 16-bit; HWIO [kkc][out] -> KRSC [out][kkc]
      gpu::TransposeToHalf(ctx_->stream(), *half_, size_t(n), s_.in_c, in_hw, x, x16_.get());
      in = x16_.get();
      gpu::TransposeToHalf(ctx_->stream(), *half_, 1, kkc, s_.out_c, w, w16_.get());
      filter = w16_.get();
      out = y16_.get();
    } else {
      gpu::HwioToOihw(ctx_->stream(), w, w_kcrs_.get(), s_.kernel, s_.in_c, s_.out_c);
    }
    MIRRORED_CUDNN_CHECK(cudnnConvolutionForward(ctx_->cudnn(), &kOne, x_.get(), in, filter_, filter, conv_, a.fwd,
                                                 ctx_->Workspace(a.fwd_bytes), a.fwd_bytes, &kZero, y_.get(), out));
    if (half_) {  // NHWC 16-bit -> NCHW f32, bias and ReLU on the way
      gpu::TransposeFromHalf(ctx_->stream(), *half_, size_t(n), out_hw, s_.out_c, y16_.get(), y,
                             s_.bias ? b : nullptr, s_.relu);
    } else if (s_.bias) {
      gpu::BiasAct(ctx_->stream(), y, b, size_t(n), s_.out_c, size_t(out_hw), s_.relu);
    } else if (s_.relu) {
      gpu::Relu(ctx_->stream(), y, y, size_t(n) * out_hw * s_.out_c);
    }
  }

  void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    if (half_) {
      HalfBackward(n, dy, dx, dw);
    } else {
      Algos& a = Prepare(n);
      if (dx != nullptr) {
        gpu::HwioToOihw(ctx_->stream(), w, w_kcrs_.get(), s_.kernel, s_.in_c, s_.out_c);
        MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx_->cudnn(), &kOne, filter_, w_kcrs_.get(), y_.get(),
                                                          dy, conv_, a.bwd_data, ctx_->Workspace(a.bwd_data_bytes),
                                                          a.bwd_data_bytes, &kZero, x_.get(), dx));
      }
      MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx_->cudnn(), &kOne, x_.get(), x, y_.get(), dy, conv_,
                                                          a.bwd_filter, ctx_->Workspace(a.bwd_filter_bytes),
                                                          a.bwd_filter_bytes, &kZero, filter_, dw_kcrs_.get()));
      gpu::OihwToHwio(ctx_->stream(), dw_kcrs_.get(), dw, s_.kernel, s_.in_c, s_.out_c);
    }
    if (s_.bias) {
      gpu::ChannelSums(ctx_->stream(), size_t(n), s_.out_c, size_t(s_.out_h()) * s_.out_w(), dy, db,
                       bias_sums_.get());
    }
  }

 private:
  struct Algos {
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;
  };

  cudnnDataType_t DataType() const { return half_ ? CudnnType(*half_) : CUDNN_DATA_FLOAT; }

  // Forward's 16-bit input and filter copies are still there (a Backward
  // follows the training Forward of the same batch): the filter gradient
  // first, then the input gradient into the input copy's buffer.
  void HalfBackward(int n, const float* dy, float* dx, float* dw) {
    Algos& a = Prepare(n);
    const int in_hw = s_.in_h * s_.in_w, out_hw = s_.out_h() * s_.out_w(), kkc = s_.kernel * s_.kernel * s_.in_c;
    gpu::TransposeToHalf(ctx_->stream(), *half_, size_t(n), s_.out_c, out_hw, dy, y16_.get());
    MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx_->cudnn(), &kOne, x_.get(), x16_.get(), y_.get(),
                                                        y16_.get(), conv_, a.bwd_filter,
                                                        ctx_->Workspace(a.bwd_filter_bytes), a.bwd_filter_bytes,
                                                        &kZero, filter_, dw16_.get()));
    gpu::TransposeFromHalf(ctx_->stream(), *half_, 1, s_.out_c, kkc, dw16_.get(), dw, nullptr, false);
    if (dx == nullptr) return;
    MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx_->cudnn(), &kOne, filter_, w16_.get(), y_.get(),
                                                      y16_.get(), conv_, a.bwd_data,
                                                      ctx_->Workspace(a.bwd_data_bytes), a.bwd_data_bytes, &kZero,
                                                      x_.get(), x16_.get()));
    gpu::TransposeFromHalf(ctx_->stream(), *half_, size_t(n), in_hw, s_.in_c, x16_.get(), dx, nullptr, false);
  }

  // Sets the descriptors for batch n and picks algorithms by cuDNN's
  // heuristics (once per n): the first one that is supported. Grows every
  // buffer Backward uses (see HalfBuffer).
  Algos& Prepare(int n) {
    const cudnnTensorFormat_t format = half_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    x_.Set(n, s_.in_c, s_.in_h, s_.in_w, format, DataType());
    y_.Set(n, s_.out_c, s_.out_h(), s_.out_w(), format, DataType());
    auto it = algos_.find(n);
    if (it != algos_.end()) return it->second;
    if (half_) {
      x16_.Reserve(size_t(n) * s_.in_h * s_.in_w * s_.in_c);
      y16_.Reserve(size_t(n) * s_.out_h() * s_.out_w() * s_.out_c);
      w16_.Reserve(size_t(s_.kernel) * s_.kernel * s_.in_c * s_.out_c);
      dw16_.Reserve(size_t(s_.kernel) * s_.kernel * s_.in_c * s_.out_c);
    }
    Algos a{};
    cudnnHandle_t h = ctx_->cudnn();
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[8];
    MIRRORED_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_.get(), filter_, conv_, y_.get(), 8, &got, fwd));
    const auto& f = FirstSupported(fwd, got, "convolution forward");
    a.fwd = f.algo;
    MIRRORED_CUDNN_CHECK(
        cudnnGetConvolutionForwardWorkspaceSize(h, x_.get(), filter_, conv_, y_.get(), a.fwd, &a.fwd_bytes));
    cudnnConvolutionBwdDataAlgoPerf_t bd[8];
    MIRRORED_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, filter_, y_.get(), conv_, x_.get(), 8, &got, bd));
    const auto& d = FirstSupported(bd, got, "convolution backward data");
    a.bwd_data = d.algo;
    MIRRORED_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, filter_, y_.get(), conv_, x_.get(),
                                                                      a.bwd_data, &a.bwd_data_bytes));
    cudnnConvolutionBwdFilterAlgoPerf_t bf[8];
    MIRRORED_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_.get(), y_.get(), conv_, filter_, 8, &got, bf));
    const auto& w = FirstSupported(bf, got, "convolution backward filter");
    a.bwd_filter = w.algo;
    MIRRORED_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_.get(), y_.get(), conv_, filter_,
                                                                        a.bwd_filter, &a.bwd_filter_bytes));
    // What a GPU run picked, for MIRRORED_LOG_LEVEL=debug (the algorithm and
    // math type enums of cudnn_cnn.h / cudnn_graph.h).
    MIRRORED_LOG(DEBUG) << "cuDNN " << s_.kernel << "x" << s_.kernel << " conv " << s_.in_c << "->" << s_.out_c
                        << " on " << s_.in_h << "x" << s_.in_w << ", batch " << n << ", "
                        << (half_ ? PrecisionName(ctx_->precision()) : "fp32") << ": forward algo " << f.algo
                        << " (math " << f.mathType << ", " << a.fwd_bytes << " B), backward data algo " << d.algo
                        << " (math " << d.mathType << ", " << a.bwd_data_bytes << " B), backward filter algo "
                        << w.algo << " (math " << w.mathType << ", " << a.bwd_filter_bytes << " B)";
    // Grown here (Forward), never in Backward: cudaFree synchronises the
    // device, which must not happen while bucket all-reduces are in flight.
    ctx_->Workspace(std::max({a.fwd_bytes, a.bwd_data_bytes, a.bwd_filter_bytes}));
    return algos_.emplace(n, a).first->second;
  }

  // The first algorithm cuDNN's heuristics rank as supported, in their order.
  template <typename Perf>
  const Perf& FirstSupported(const Perf* perf, int got, const char* what) const {
    for (int i = 0; i < got; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS) return perf[i];
    throw CudaError(std::string(what) + ": cuDNN offers no supported algorithm for a " +
                    std::to_string(s_.kernel) + "x" + std::to_string(s_.kernel) + " stride " +
                    std::to_string(s_.stride) + " convolution " + std::to_string(s_.in_c) + " -> " +
                    std::to_string(s_.out_c) + " channels on " + std::to_string(s_.in_h) + "x" +
                    std::to_string(s_.in_w) + (half_ ? std::string(" (NHWC ") + PrecisionName(ctx_->precision()) + ")"
                                                     : std::string(" (NCHW float32)")));
  }

  GpuContext* ctx_;
  ConvSpec s_;
  std::optional<gpu::HalfType> half_;
  cudnnFilterDescriptor_t filter_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  TensorDesc x_, y_;
  Buffer w_kcrs_, dw_kcrs_, bias_sums_;
  HalfBuffer x16_, y16_, w16_, dw16_;
  std::map<int, Algos> algos_;
};

// -------------------------------------------------------------- pooling ----
// Max or average pooling (`mode`), no padding.
class CudnnPool final : public PoolKernel {
 public:
  CudnnPool(GpuContext* ctx, const PoolSpec& s, cudnnPoolingMode_t mode) : ctx_(ctx), s_(s) {
    MIRRORED_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_));
    MIRRORED_CUDNN_CHECK(
        cudnnSetPooling2dDescriptor(pool_, mode, CUDNN_NOT_PROPAGATE_NAN, s.size, s.size, 0, 0, s.stride, s.stride));
  }
  ~CudnnPool() override { cudnnDestroyPoolingDescriptor(pool_); }

  void Forward(int n, const float* x, float* y, bool) override {
    Set(n);
    MIRRORED_CUDNN_CHECK(cudnnPoolingForward(ctx_->cudnn(), pool_, &kOne, x_.get(), x, &kZero, y_.get(), y));
  }
  void Backward(int n, const float* x, const float* y, const float* dy, float* dx) override {
    Set(n);
    MIRRORED_CUDNN_CHECK(cudnnPoolingBackward(ctx_->cudnn(), pool_, &kOne, y_.get(), y, y_.get(), dy, x_.get(), x,
                                              &kZero, x_.get(), dx));
  }

 private:
  void Set(int n) {
    x_.Set(n, s_.channels, s_.in_h, s_.in_w);
    y_.Set(n, s_.channels, s_.out_h(), s_.out_w());
  }
  GpuContext* ctx_;
  PoolSpec s_;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  TensorDesc x_, y_;
};

// ----------------------------------------------------------- batch norm ----
// Our own NCHW kernels (gpu_batch_norm.cu), not cuDNN's: deterministic, and
// faster than its NCHW FP32 batch norm for our shapes (its NHWC one was ~10x
// slower still).
class GpuBatchNorm final : public BatchNormKernel {
 public:
  GpuBatchNorm(GpuContext* ctx, const BatchNormSpec& s)
      : ctx_(ctx), s_(s), scratch_(gpu::BatchNormScratchFloats(s.channels)) {
    // A Backward with no training Forward before it (outside the interface's
    // contract) then reads zero statistics, as the CPU kernel would, not
    // whatever the allocation held. On the context's stream: it is
    // non-blocking, so a plain cudaMemset on the default stream would not be
    // ordered before its kernels.
    MIRRORED_CUDA_CHECK(cudaMemsetAsync(scratch_.get(), 0, gpu::BatchNormScratchFloats(s.channels) * sizeof(float),
                                        ctx->stream()));
  }

  void Forward(int n, const float* x, const float* gamma, const float* beta, float* moving_mean, float* moving_var,
               float* y, bool training) override {
    const size_t hw = size_t(s_.h) * s_.w;
    if (training) {
      gpu::BatchNormTrainingForward(ctx_->stream(), size_t(n), s_.channels, hw, x, gamma, beta, s_.epsilon,
                                    s_.momentum, moving_mean, moving_var, y, scratch_.get());
    } else {
      gpu::BatchNormInferenceForward(ctx_->stream(), size_t(n), s_.channels, hw, x, gamma, beta, moving_mean,
                                     moving_var, s_.epsilon, y);
    }
  }

  void Backward(int n, const float* x, const float* dy, const float* gamma, const float*, float* dx, float* dgamma,
                float* dbeta) override {
    gpu::BatchNormBackward(ctx_->stream(), size_t(n), s_.channels, size_t(s_.h) * s_.w, x, dy, gamma, dx, dgamma,
                           dbeta, scratch_.get());
  }

 private:
  GpuContext* ctx_;
  BatchNormSpec s_;
  Buffer scratch_;
};

}  // namespace

GpuContext::GpuContext(int ordinal, Precision precision) : ordinal_(ordinal), precision_(precision) {
  try {
    MIRRORED_CUDA_CHECK(cudaSetDevice(ordinal));
    MIRRORED_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const CublasLibrary& cublas = CublasLibrary::Get();  // throws when cuBLAS cannot be loaded
    MIRRORED_CUBLAS_CHECK(cublas.Create(&cublas_));
    MIRRORED_CUBLAS_CHECK(cublas.SetStream(cublas_, stream_));
    // FP32 SGEMM without TF32 unless --precision tf32: cuBLAS's default
    // math, as PyTorch sets it with allow_tf32 off (pedantic math would
    // forbid some faster FP32 kernels too). 16-bit GemmEx calls use tensor
    // cores under the default math.
    MIRRORED_CUBLAS_CHECK(
        cublas.SetMathMode(cublas_, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    MIRRORED_CUDNN_CHECK(cudnnCreate(&cudnn_));
    MIRRORED_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  } catch (...) {
    Release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

GpuContext::~GpuContext() { Release(); }

void GpuContext::Release() {
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) CublasLibrary::Get().Destroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  workspace_ = nullptr;
  cudnn_ = nullptr;
  cublas_ = nullptr;
  stream_ = nullptr;
}

void* GpuContext::Workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    // cudaFree synchronises the device, so no queued kernel still uses the old one.
    if (workspace_ != nullptr) MIRRORED_CUDA_CHECK(cudaFree(workspace_));
    workspace_ = nullptr;
    MIRRORED_CUDA_CHECK(cudaMalloc(&workspace_, bytes));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

std::unique_ptr<DenseKernel> MakeCublasDense(GpuContext* ctx, const DenseSpec& spec) {
  return std::make_unique<CublasDense>(ctx, spec);
}
std::unique_ptr<ConvKernel> MakeCudnnConv(GpuContext* ctx, const ConvSpec& spec) {
  if (spec.symmetric()) return std::make_unique<CudnnConv>(ctx, spec);
  return MakePaddedInputConv(ctx, spec, std::make_unique<CudnnConv>(ctx, SymmetricPart(spec)));
}
std::unique_ptr<PoolKernel> MakeCudnnMaxPool(GpuContext* ctx, const PoolSpec& spec) {
  return std::make_unique<CudnnPool>(ctx, spec, CUDNN_POOLING_MAX);
}
std::unique_ptr<PoolKernel> MakeCudnnAvgPool(GpuContext* ctx, const PoolSpec& spec) {
  return std::make_unique<CudnnPool>(ctx, spec, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
}
std::unique_ptr<BatchNormKernel> MakeGpuBatchNorm(GpuContext* ctx, const BatchNormSpec& spec) {
  return std::make_unique<GpuBatchNorm>(ctx, spec);
}

}  // namespace mirrored::model
