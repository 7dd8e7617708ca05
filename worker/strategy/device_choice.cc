#include "worker/strategy/device_choice.h"

#include "mirrored/config.h"

#if MIRRORED_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mirrored {

StatusOr<DeviceKind> ParseDeviceKind(std::string_view value) {
  if (value == "auto") return DeviceKind::kAuto;
  if (value == "cpu") return DeviceKind::kCpu;
  if (value == "gpu") return DeviceKind::kGpu;
  return InvalidArgumentError("--device \"" + std::string(value) + "\" is not one of auto, cpu, gpu");
}

std::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kAuto: return "auto";
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kGpu: return "gpu";
  }
  return "?";
}

std::string ReplicaDevices::Describe() const {
  const int n = local_replicas();
  std::string out = std::to_string(n) + (gpu ? " GPU" : " CPU") + " replica" + (n == 1 ? "" : "s");
  if (gpu) {
    out += n == 1 ? " (GPU " : " (GPUs ";
    for (size_t i = 0; i < gpus.size(); ++i) out += (i ? "," : "") + std::to_string(gpus[i]);
    out += ")";
  }
  return out;
}

#if MIRRORED_WITH_CUDA
GpuProbe ProbeGpus() {
  GpuProbe probe;
  const cudaError_t rc = cudaGetDeviceCount(&probe.count);
  if (rc != cudaSuccess) {
    probe.count = 0;
    probe.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc);
    (void)cudaGetLastError();
  } else if (probe.count == 0) {
    probe.error = "cudaGetDeviceCount: 0 devices";
  }
  return probe;
}

Status BindThreadToGpu(int ordinal) {
  const cudaError_t rc = cudaSetDevice(ordinal);
  if (rc == cudaSuccess) return OkStatus();
  return InternalError("cudaSetDevice(" + std::to_string(ordinal) + ") failed: " + cudaGetErrorString(rc));
}
#else
GpuProbe ProbeGpus() { return {0, "this mirrored-worker was built without CUDA (MIRRORED_WITH_CUDA=OFF)"}; }

Status BindThreadToGpu(int ordinal) {
  return FailedPreconditionError("GPU " + std::to_string(ordinal) +
                                 ": this build has no CUDA (MIRRORED_WITH_CUDA=OFF)");
}
#endif

StatusOr<ReplicaDevices> ResolveReplicaDevices(DeviceKind kind, int cpu_replicas, const GpuProbe& probe) {
  ReplicaDevices d;
  const bool want_gpu = kind == DeviceKind::kGpu || (kind == DeviceKind::kAuto && probe.count > 0);
  if (!want_gpu) {
    if (cpu_replicas < 1) {
      return InvalidArgumentError("--cpu-replicas " + std::to_string(cpu_replicas) + " must be at least 1");
    }
    d.cpu_replicas = cpu_replicas;
    return d;
  }
  if (probe.count < 1) {
    return InvalidArgumentError(
        "--device gpu: no usable GPU (" + (probe.error.empty() ? std::string("no CUDA device") : probe.error) +
        "); check the driver and CUDA_VISIBLE_DEVICES, or use --device cpu (or auto) for CPU replicas");
  }
  d.gpu = true;
  for (int i = 0; i < probe.count; ++i) d.gpus.push_back(i);
  return d;
}

}  // namespace mirrored
