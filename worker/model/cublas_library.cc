#include "worker/model/cublas_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "worker/model/cuda_check.h"

namespace mirrored::model {
namespace {

#define MIRRORED_STR2(x) #x
#define MIRRORED_STR(x) MIRRORED_STR2(x)
constexpr const char* kSoname = "libcublas.so." MIRRORED_STR(CUBLAS_VER_MAJOR);

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    const char* why = dlerror();
    throw CudaError(std::string(kSoname) + ": symbol " + name + " not found (" + (why ? why : "null") + ")");
  }
  *out = reinterpret_cast<Fn>(sym);
}

CublasLibrary Load() {
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw CudaError(std::string("cannot load ") + kSoname + " (" + (why ? why : "unknown error") +
                    "): install cuBLAS or add its directory to LD_LIBRARY_PATH");
  }
  CublasLibrary lib{};
  Resolve(handle, "cublasCreate_v2", &lib.Create);
  Resolve(handle, "cublasDestroy_v2", &lib.Destroy);
  Resolve(handle, "cublasSetStream_v2", &lib.SetStream);
  Resolve(handle, "cublasSetMathMode", &lib.SetMathMode);
  Resolve(handle, "cublasSgemm_v2", &lib.Sgemm);
  Resolve(handle, "cublasGemmEx", &lib.GemmEx);
  Resolve(handle, "cublasGetStatusString", &lib.GetStatusString);
  return lib;  // the handle stays open for the process's life
}

}  // namespace

const CublasLibrary& CublasLibrary::Get() {
  static std::once_flag once;
  static CublasLibrary lib;
  static std::string error;
  std::call_once(once, [] {
    try {
      lib = Load();
    } catch (const CudaError& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw CudaError(error);
  return lib;
}

}  // namespace mirrored::model
