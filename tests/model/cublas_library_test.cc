// cuBLAS is loaded on demand (not linked, so CPU-only processes start fast):
// the loader finds the library of the headers' major version and every
// symbol the GPU backend calls. Needs the library, not a GPU.
#include <gtest/gtest.h>

#include <string>

#include "worker/model/cublas_library.h"
#include "worker/model/cuda_check.h"

namespace mirrored::model {
namespace {

TEST(CublasLibraryTest, LoadsEverySymbolOnce) {
  const CublasLibrary* lib = nullptr;
  try {
    lib = &CublasLibrary::Get();
  } catch (const CudaError& e) {
    FAIL() << e.what();
  }
  EXPECT_NE(lib->Create, nullptr);
  EXPECT_NE(lib->Destroy, nullptr);
  EXPECT_NE(lib->SetStream, nullptr);
  EXPECT_NE(lib->SetMathMode, nullptr);
  EXPECT_NE(lib->Sgemm, nullptr);
  EXPECT_NE(lib->GemmEx, nullptr);
  ASSERT_NE(lib->GetStatusString, nullptr);
  EXPECT_NE(std::string(lib->GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)).find("not initialized"),
            std::string::npos);
  EXPECT_EQ(&CublasLibrary::Get(), lib);
}

}  // namespace
}  // namespace mirrored::model
