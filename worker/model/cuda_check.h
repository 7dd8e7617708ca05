// Check macros for every CUDA runtime, cuBLAS and cuDNN call of the GPU
// backend: a failure throws CudaError carrying the call's text, the file,
// the line and the library's own error string, e.g.
// "cudnnConvolutionForward(...) failed at gpu_backend.cc:120: CUDNN_STATUS_BAD_PARAM".
//
//   MIRRORED_CUDA_CHECK(cudaMalloc(&p, bytes));
//   MIRRORED_CUBLAS_CHECK(CublasLibrary::Get().Sgemm(handle, ...));   // cublas_library.h
//   MIRRORED_CUDNN_CHECK(cudnnPoolingForward(handle, ...));
#pragma once

#include <stdexcept>
#include <string>

namespace mirrored::model {

// Thrown by the check macros; the replica turns it into a Status.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void ThrowCudaError(const char* call, const char* file, int line, const std::string& error);

}  // namespace mirrored::model

#define MIRRORED_CUDA_CHECK(call)                                                                    \
  do {                                                                                               \
    cudaError_t _mirrored_e = (call);                                                                \
    if (_mirrored_e != cudaSuccess)                                                                  \
      ::mirrored::model::ThrowCudaError(#call, __FILE__, __LINE__, cudaGetErrorString(_mirrored_e)); \
  } while (0)

#define MIRRORED_CUBLAS_CHECK(call)                                                                         \
  do {                                                                                                      \
    cublasStatus_t _mirrored_s = (call);                                                                    \
    if (_mirrored_s != CUBLAS_STATUS_SUCCESS)                                                               \
      ::mirrored::model::ThrowCudaError(#call, __FILE__, __LINE__,                                          \
                                        ::mirrored::model::CublasLibrary::Get().GetStatusString(_mirrored_s)); \
  } while (0)

#define MIRRORED_CUDNN_CHECK(call)                                                                   \
  do {                                                                                               \
    cudnnStatus_t _mirrored_s = (call);                                                              \
    if (_mirrored_s != CUDNN_STATUS_SUCCESS)                                                         \
      ::mirrored::model::ThrowCudaError(#call, __FILE__, __LINE__, cudnnGetErrorString(_mirrored_s)); \
  } while (0)

// After a kernel launch: configuration errors surface here, with the launch text.
#define MIRRORED_CUDA_LAUNCH_CHECK(what) MIRRORED_CUDA_CHECK(((void)(what), cudaGetLastError()))
