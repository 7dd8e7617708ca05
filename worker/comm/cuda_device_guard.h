// Puts the calling thread on a CUDA device for a scope, then back on the one
// it was on: code that walks several GPUs (aborting or tearing down a whole
// replica group, possibly from one replica's thread) must not leave that
// thread on another GPU, where its own later CUDA calls would go. Only
// compiled with MIRRORED_WITH_CUDA. Errors are ignored: it serves teardown
// and abort paths, which go on regardless.
//
//   { CudaDeviceGuard on(device_); ncclCommAbort(comm_); }   // current device restored
#pragma once

#include <cuda_runtime_api.h>

namespace mirrored {

class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (device != previous_) cudaSetDevice(device);
  }
  ~CudaDeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace mirrored
