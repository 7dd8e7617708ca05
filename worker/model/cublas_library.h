// cuBLAS, loaded with dlopen the first time a GPU backend needs it, not
// linked: libcublasLt's static initialisers cost about 65 ms of page faults
// in every process that links it, GPU or not (measured: mirrored-worker
// --version 0.10 s linked, 0.02 s not), which every CPU-only worker of a
// job would pay at start-up. Only the calls the GPU backend makes are here.
//
//   const CublasLibrary& cublas = CublasLibrary::Get();   // throws CudaError if it cannot be loaded
//   MIRRORED_CUBLAS_CHECK(cublas.Sgemm(handle, CUBLAS_OP_N, ...));
//
// Only with MIRRORED_WITH_CUDA.
#pragma once

#include <cublas_v2.h>

namespace mirrored::model {

struct CublasLibrary {
  decltype(&cublasCreate_v2) Create;
  decltype(&cublasDestroy_v2) Destroy;
  decltype(&cublasSetStream_v2) SetStream;
  decltype(&cublasSetMathMode) SetMathMode;
  decltype(&cublasSgemm_v2) Sgemm;
  // bf16 / fp16 products with FP32 output (--precision); the C signature
  // (the headers overload it for C++).
  cublasStatus_t (*GemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                           const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                           cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusString) GetStatusString;

  // Loads libcublas.so.<major of the headers> once (thread-safe). Throws
  // CudaError naming the library and dlerror()'s text when it or one of the
  // symbols is missing.
  static const CublasLibrary& Get();
};

}  // namespace mirrored::model
