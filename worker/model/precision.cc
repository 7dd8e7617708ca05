#include "worker/model/precision.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace mirrored::model {

StatusOr<Precision> ParsePrecision(const std::string& text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "tf32") return Precision::kTf32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  return InvalidArgumentError("--precision \"" + text + "\" is not one of fp32, tf32, bf16, fp16");
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

CpuHalfSupport DetectCpuHalfSupport() {
  CpuHalfSupport s;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    s.amx_bf16 = (edx >> 22) & 1;     // CPUID.(7,0):EDX[22]
    s.avx512_fp16 = (edx >> 23) & 1;  // CPUID.(7,0):EDX[23]
    if (eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
      s.avx512_bf16 = (eax >> 5) & 1;  // CPUID.(7,1):EAX[5]
    }
  }
#endif
  return s;
}

Status CheckCpuPrecision(Precision p, const CpuHalfSupport& cpu) {
  const std::string use = ": use --precision fp32 on the CPU, or train on a GPU (--device gpu)";
  switch (p) {
    case Precision::kFp32:
      return OkStatus();
    case Precision::kTf32:
      return InvalidArgumentError("--precision tf32 is a GPU math mode (TF32 tensor cores) and these replicas run "
                                  "on the CPU, which computes in FP32" + use);
    case Precision::kBf16:
      // oneDNN's bf16 kernels (cpu_dnnl_kernels.h) all need AVX512_BF16; AMX-BF16 speeds them where present.
      if (cpu.avx512_bf16) return OkStatus();
      return InvalidArgumentError(std::string("--precision bf16 on the CPU needs AVX512_BF16, which this CPU lacks") +
                                  (cpu.amx_bf16 ? " (it reports AMX-BF16 alone)" : "") +
                                  " (mirrored does not emulate bf16)" + use);
    case Precision::kFp16:
      return InvalidArgumentError(std::string("--precision fp16 on the CPU: ") +
                                  (cpu.avx512_fp16 ? "this CPU has AVX512_FP16, but mirrored's CPU kernels "
                                                     "(oneDNN 2.6) have no fp16 path"
                                                   : "this CPU lacks AVX512_FP16 (mirrored does not emulate fp16)") +
                                  use);
  }
  return InvalidArgumentError("--precision: unknown value");
}

}  // namespace mirrored::model
