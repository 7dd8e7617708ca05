#include "worker/train/cuda_event_fence.h"

#include <vector>

#include "mirrored/config.h"

#if MIRRORED_WITH_CUDA
#include <cuda_runtime_api.h>

#include "worker/comm/nccl_check.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/model/gpu_backend.h"
#endif

namespace mirrored {

#if MIRRORED_WITH_CUDA
namespace {

class CudaEventFence final : public GradientFence {
 public:
  CudaEventFence(int device, cudaStream_t compute, cudaStream_t comm) : device_(device), compute_(compute), comm_(comm) {}
  ~CudaEventFence() override {
    cudaSetDevice(device_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);  // destroying a pending event is allowed
  }

  Status CreateEvents(size_t buckets) {
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    for (size_t b = 0; b < buckets; ++b) {
      cudaEvent_t e = nullptr;
      MIRRORED_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    return OkStatus();
  }

  // On the replica's thread, which is bound to device_.
  Status Mark(size_t bucket) override {
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_.at(bucket), compute_));
    return OkStatus();
  }

  // On the bucketer's communication thread: bind it (NcclCommunicator does
  // too), then queue the wait; the host does not block.
  Status Wait(size_t bucket) override {
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(comm_, events_.at(bucket), 0));
    return OkStatus();
  }

 private:
  const int device_;
  const cudaStream_t compute_;
  const cudaStream_t comm_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

StatusOr<std::unique_ptr<GradientFence>> MakeCudaEventFence(model::Backend& compute, Communicator& comm,
                                                            size_t buckets) {
  auto* gpu = dynamic_cast<model::GpuBackend*>(&compute);
  auto* nccl = dynamic_cast<NcclCommunicator*>(&comm);
  if (gpu == nullptr || nccl == nullptr) {
    return InvalidArgumentError("a CUDA event fence needs a GPU backend and an NCCL communicator, got backend " +
                                compute.name() + (nccl == nullptr ? " and a non-NCCL communicator" : ""));
  }
  if (gpu->name() != "gpu:" + std::to_string(nccl->device())) {
    return InvalidArgumentError("backend " + gpu->name() + " and the NCCL communicator (GPU " +
                                std::to_string(nccl->device()) + ") are on different devices");
  }
  auto fence = std::make_unique<CudaEventFence>(nccl->device(), gpu->stream(), nccl->stream());
  MIRRORED_RETURN_IF_ERROR(fence->CreateEvents(buckets));
  return std::unique_ptr<GradientFence>(std::move(fence));
}
#else
StatusOr<std::unique_ptr<GradientFence>> MakeCudaEventFence(model::Backend& compute, Communicator&, size_t) {
  return FailedPreconditionError("backend " + compute.name() +
                                 ": a CUDA event fence needs a build with CUDA (MIRRORED_WITH_CUDA=OFF)");
}
#endif

}  // namespace mirrored
