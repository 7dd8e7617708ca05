// How a test of the CPU's bf16 products leaves a machine whose CPU (or
// oneDNN) lacks bf16 instructions: skipped, naming what is missing; or
// failed, when MIRRORED_REQUIRE_CPU_BF16 is set, so that a machine known to
// have AMX-BF16 cannot pass them as "skipped".
//
//   MIRRORED_SKIP_OR_FAIL_WITHOUT_CPU_BF16();
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "worker/model/backend.h"

// In a test body or SetUp(): returns from it when the CPU backend cannot
// compute in bf16 here.
#define MIRRORED_SKIP_OR_FAIL_WITHOUT_CPU_BF16()                                                           \
  do {                                                                                                     \
    const ::mirrored::Status _mirrored_bf16 =                                                              \
        ::mirrored::model::CheckCpuBackendPrecision(::mirrored::model::Precision::kBf16);                  \
    if (!_mirrored_bf16.ok()) {                                                                            \
      const char* _mirrored_require = std::getenv("MIRRORED_REQUIRE_CPU_BF16");                            \
      if (_mirrored_require != nullptr && *_mirrored_require != '\0' &&                                    \
          std::string(_mirrored_require) != "0") {                                                         \
        GTEST_FAIL() << "MIRRORED_REQUIRE_CPU_BF16 is set but: " << _mirrored_bf16.message();              \
      }                                                                                                    \
      GTEST_SKIP() << "no CPU bf16: " << _mirrored_bf16.message();                                         \
    }                                                                                                      \
  } while (0)
