#include "worker/model/gpu_backend.h"

#include "common/logging.h"
#include "worker/model/cuda_check.h"
#include "worker/model/gpu_kernels.h"

namespace mirrored::model {

void ThrowCudaError(const char* call, const char* file, int line, const std::string& error) {
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + error);
}

GpuBackend::GpuBackend(int ordinal, Precision precision) : ctx_(ordinal, precision) {
  MIRRORED_CUDA_CHECK(cudaMalloc(&nonfinite_, sizeof(int)));
  const cudaError_t pinned = cudaMallocHost(&nonfinite_host_, sizeof(int));
  if (pinned != cudaSuccess) {
    cudaFree(nonfinite_);  // the destructor does not run for a constructor that throws
    ThrowCudaError("cudaMallocHost(&nonfinite_host_, sizeof(int))", __FILE__, __LINE__, cudaGetErrorString(pinned));
  }
}

GpuBackend::~GpuBackend() {
  cudaFree(nonfinite_);
  cudaFreeHost(nonfinite_host_);
}

bool GpuBackend::UnscaleAndCheckFinite(float* g, size_t count, float factor) {
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(nonfinite_, 0, sizeof(int), ctx_.stream()));
  gpu::UnscaleCheckFinite(ctx_.stream(), g, count, factor, nonfinite_);
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(nonfinite_host_, nonfinite_, sizeof(int), cudaMemcpyDeviceToHost, ctx_.stream()));
  MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
  return *nonfinite_host_ == 0;
}

float* GpuBackend::Allocate(size_t count) {
  void* p = nullptr;
  MIRRORED_CUDA_CHECK(cudaSetDevice(ctx_.ordinal()));
  MIRRORED_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(float)));
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(p, 0, std::max<size_t>(count, 1) * sizeof(float), ctx_.stream()));
  return static_cast<float*>(p);
}

void GpuBackend::Free(float* p) {
  // Called from destructors: report, never throw.
  if (p == nullptr) return;
  cudaError_t e = cudaFree(p);
  if (e != cudaSuccess) {
    MIRRORED_LOG(ERROR) << "cudaFree(p) failed on gpu:" << ctx_.ordinal() << ": " << cudaGetErrorString(e);
  }
}

void GpuBackend::Upload(const float* host, float* device, size_t count) {
  if (count == 0) return;
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(device, host, count * sizeof(float), cudaMemcpyHostToDevice, ctx_.stream()));
  // The host buffer may be reused as soon as we return.
  MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
}

void GpuBackend::Download(const float* device, float* host, size_t count) {
  if (count == 0) return;
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(host, device, count * sizeof(float), cudaMemcpyDeviceToHost, ctx_.stream()));
  MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
}

void GpuBackend::Copy(const float* src, float* dst, size_t count) {
  if (count == 0 || src == dst) return;
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, ctx_.stream()));
}

void GpuBackend::Zero(float* p, size_t count) {
  if (count) MIRRORED_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(float), ctx_.stream()));
}

void GpuBackend::Synchronize() { MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream())); }

std::unique_ptr<DenseKernel> GpuBackend::MakeDense(const DenseSpec& spec) { return MakeCublasDense(&ctx_, spec); }
std::unique_ptr<ConvKernel> GpuBackend::MakeConv(const ConvSpec& spec) { return MakeCudnnConv(&ctx_, spec); }
std::unique_ptr<PoolKernel> GpuBackend::MakeMaxPool(const PoolSpec& spec) { return MakeCudnnMaxPool(&ctx_, spec); }
std::unique_ptr<PoolKernel> GpuBackend::MakeAvgPool(const PoolSpec& spec) { return MakeCudnnAvgPool(&ctx_, spec); }
std::unique_ptr<BatchNormKernel> GpuBackend::MakeBatchNorm(const BatchNormSpec& spec) {
  return MakeGpuBatchNorm(&ctx_, spec);
}

void GpuBackend::Relu(const float* x, float* y, size_t count) { gpu::Relu(ctx_.stream(), x, y, count); }
void GpuBackend::ReluMask(const float* y, float* dy, size_t count) { gpu::ReluMask(ctx_.stream(), y, dy, count); }
void GpuBackend::AddRelu(const float* a, const float* b, float* y, size_t count) {
  gpu::AddRelu(ctx_.stream(), a, b, y, count);
}
void GpuBackend::Accumulate(const float* src, float* dst, size_t count) {
  gpu::Accumulate(ctx_.stream(), src, dst, count);
}
void GpuBackend::Multiply(const float* a, const float* b, float* y, size_t count) {
  gpu::Multiply(ctx_.stream(), a, b, y, count);
}
void GpuBackend::ScaleShift(const float* x, float scale, float offset, float* y, size_t count) {
  gpu::ScaleShift(ctx_.stream(), x, scale, offset, y, count);
}
void GpuBackend::ChannelsFirstToLast(int n, int hw, int c, const float* x, float* y) {
  gpu::ChannelsFirstToLast(ctx_.stream(), n, hw, c, x, y);
}
void GpuBackend::ChannelsLastToFirst(int n, int hw, int c, const float* x, float* y) {
  gpu::ChannelsLastToFirst(ctx_.stream(), n, hw, c, x, y);
}
void GpuBackend::GlobalAvgPool(int n, int hw, int c, const float* x, float* y) {
  gpu::GlobalAvgPool(ctx_.stream(), n, hw, c, x, y);
}
void GpuBackend::GlobalAvgPoolBackward(int n, int hw, int c, const float* dy, float* dx) {
  gpu::GlobalAvgPoolBackward(ctx_.stream(), n, hw, c, dy, dx);
}
void GpuBackend::SoftmaxCrossEntropy(int n, int classes, const float* logits, const float* labels, float* losses,
                                     float* probs) {
  gpu::SoftmaxCrossEntropy(ctx_.stream(), n, classes, logits, labels, losses, probs);
}
void GpuBackend::SoftmaxCrossEntropyBackward(int n, int classes, const float* probs, const float* labels,
                                             const float* weights, float* dlogits) {
  gpu::SoftmaxCrossEntropyBackward(ctx_.stream(), n, classes, probs, labels, weights, dlogits);
}
void GpuBackend::AdamUpdate(size_t count, float* p, const float* g, float* m, float* v, float lr_t, float beta1,
                            float beta2, float epsilon) {
  gpu::Adam(ctx_.stream(), count, p, g, m, v, lr_t, beta1, beta2, epsilon);
}
void GpuBackend::SgdMomentumUpdate(size_t count, float* p, const float* g, float* vel, float lr, float momentum) {
  gpu::SgdMomentum(ctx_.stream(), count, p, g, vel, lr, momentum);
}

int GpuDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: clear the sticky error
    return 0;
  }
  return count;
}

StatusOr<std::unique_ptr<Backend>> MakeGpuBackend(int ordinal, Precision precision) {
  const int count = GpuDeviceCount();
  if (ordinal < 0 || ordinal >= count) {
    return UnavailableError("GPU " + std::to_string(ordinal) + " requested but " + std::to_string(count) +
                            " CUDA device(s) are visible (check CUDA_VISIBLE_DEVICES and the driver)");
  }
  try {
    return std::unique_ptr<Backend>(std::make_unique<GpuBackend>(ordinal, precision));
  } catch (const CudaError& e) {
    return UnavailableError("GPU " + std::to_string(ordinal) + ": " + e.what());
  }
}

}  // namespace mirrored::model
