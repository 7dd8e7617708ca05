// How a gpu-labelled test leaves a machine without a usable CUDA device:
// skipped, so CPU machines stay green; or failed, when MIRRORED_REQUIRE_GPU
// is set (bench/training/gpu_train.sh sets it), so that on the GPU machine a
// broken driver or a missing libcuda cannot pass as "skipped".
//
//   MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(ProbeGpus().count, ProbeGpus().error);
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

// In a test body or SetUp(): returns from it when `count` is 0.
#define MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(count, why)                                            \
  do {                                                                                           \
    if ((count) == 0) {                                                                          \
      const char* _mirrored_require = std::getenv("MIRRORED_REQUIRE_GPU");                       \
      if (_mirrored_require != nullptr && *_mirrored_require != '\0' &&                          \
          std::string(_mirrored_require) != "0") {                                               \
        GTEST_FAIL() << "MIRRORED_REQUIRE_GPU is set but no CUDA device can be used: " << (why); \
      }                                                                                          \
      GTEST_SKIP() << "no CUDA device: " << (why);                                               \
    }                                                                                            \
  } while (0)
