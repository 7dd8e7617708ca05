// The arithmetic of a replica's layers (--precision), as Keras' mixed
// precision policies and PyTorch's autocast have it: variables, optimizer
// slots, gradients, batch-norm statistics and the loss stay FP32 in every
// mode; only the matrix products of dense and convolution layers change.
//   fp32  FP32 products (no TF32): the default, bit-for-bit today's results.
//   tf32  FP32 tensors, products on TF32 tensor cores (cuBLAS/cuDNN math
//         mode only; GPU only).
//   bf16  products in bfloat16, accumulated in FP32 (Keras
//         "mixed_bfloat16"): on tensor cores, or on CPUs with AVX512_BF16 /
//         AMX-BF16 through oneDNN.
//   fp16  products in float16, accumulated in FP32, with dynamic loss
//         scaling (Keras "mixed_float16", loss_scale.h); GPU only (oneDNN
//         2.6 has no fp16 CPU kernels).
//
//   MIRRORED_ASSIGN_OR_RETURN(Precision p, ParsePrecision("bf16"));
//   MIRRORED_RETURN_IF_ERROR(CheckCpuPrecision(p));   // on a CPU replica
#pragma once

#include <string>

#include "common/status.h"

namespace mirrored::model {

enum class Precision { kFp32, kTf32, kBf16, kFp16 };

// InvalidArgument naming --precision and the value for anything else.
StatusOr<Precision> ParsePrecision(const std::string& text);
// "fp32", "tf32", "bf16", "fp16".
const char* PrecisionName(Precision p);
// Products in a 16-bit type (bf16, fp16).
inline bool Is16Bit(Precision p) { return p == Precision::kBf16 || p == Precision::kFp16; }
// Needs dynamic loss scaling (fp16: its 5-bit exponent loses small gradients).
inline bool NeedsLossScaling(Precision p) { return p == Precision::kFp16; }

// The CPU's instruction sets for 16-bit arithmetic, from CPUID.
struct CpuHalfSupport {
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool avx512_fp16 = false;
};
CpuHalfSupport DetectCpuHalfSupport();

// Whether CPU replicas can train in `p`: fp32 always; tf32 never (a GPU
// math mode); bf16 where the CPU has AVX512_BF16 (and AMX-BF16, which
// oneDNN uses where present, never without it), refused
// rather than emulated elsewhere, naming what this CPU lacks; fp16 never
// (oneDNN 2.6 has no fp16 CPU kernels), naming whether the CPU has
// AVX512_FP16. InvalidArgument (exit 2). The CPU backend also checks
// oneDNN's own instruction set (CheckCpuBackendPrecision, backend.h).
Status CheckCpuPrecision(Precision p, const CpuHalfSupport& cpu = DetectCpuHalfSupport());

}  // namespace mirrored::model
