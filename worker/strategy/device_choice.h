// `--device auto|cpu|gpu` resolved into this task's replicas (DESIGN.md,
// "Replicas"): one replica per visible GPU, or `--cpu-replicas N` on a host
// without one. The CUDA runtime is asked once (ProbeGpus); the decision is a
// pure function of its answer, so it is tested without a device.
//
//   MIRRORED_ASSIGN_OR_RETURN(DeviceKind kind, ParseDeviceKind(options.device));
//   MIRRORED_ASSIGN_OR_RETURN(ReplicaDevices d, ResolveReplicaDevices(kind, options.cpu_replicas, ProbeGpus()));
//   d.gpu ? "NCCL over d.gpus" : "d.cpu_replicas CPU replicas";
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mirrored {

enum class DeviceKind { kAuto, kCpu, kGpu };

// "auto", "cpu" or "gpu"; InvalidArgument naming --device otherwise.
StatusOr<DeviceKind> ParseDeviceKind(std::string_view value);
std::string_view DeviceKindName(DeviceKind kind);

// What the CUDA runtime says about this process's GPUs (after
// CUDA_VISIBLE_DEVICES). `error` explains a zero count: the runtime's own
// words ("cudaGetDeviceCount: no CUDA-capable device is detected"), or that
// the build has no CUDA.
struct GpuProbe {
  int count = 0;
  std::string error;
};

// cudaGetDeviceCount, its error cleared (a failed probe must not poison the
// next CUDA call). Without MIRRORED_WITH_CUDA: count 0, error says so.
GpuProbe ProbeGpus();

// The replicas this task runs.
struct ReplicaDevices {
  bool gpu = false;
  std::vector<int> gpus;  // CUDA ordinal of each local replica (gpu only)
  int cpu_replicas = 1;   // (cpu only)

  int local_replicas() const { return gpu ? static_cast<int>(gpus.size()) : cpu_replicas; }
  // "1 GPU replica (GPU 0)", "2 CPU replicas".
  std::string Describe() const;
};

// kAuto: every visible GPU when probe.count > 0, else `cpu_replicas` CPU
// replicas. kCpu: `cpu_replicas` CPU replicas. kGpu: every visible GPU.
// Errors: InvalidArgument (exit code 2: a configuration a restart cannot
// fix) for kGpu without a usable GPU, naming the flag and the probe's error.
StatusOr<ReplicaDevices> ResolveReplicaDevices(DeviceKind kind, int cpu_replicas, const GpuProbe& probe);

// Makes `ordinal` the calling thread's current CUDA device (replica threads
// bind once, before creating anything on it). Internal with the runtime's
// text on failure; FailedPrecondition in a build without CUDA.
Status BindThreadToGpu(int ordinal);

}  // namespace mirrored
