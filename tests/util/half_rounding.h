// The tests' own reference for 16-bit rounding, independent of the product's
// conversions (worker/comm/half_conversion.h, the GPU kernels, oneDNN's
// reorders): round to nearest even, as __float2bfloat16_rn,
// __float2half_rn and oneDNN's f32 -> bf16 reorder do (finite values).
//
//   float b = RoundBf16(1.00390625f);   // 1.0f: the tie goes to the even mantissa
#pragma once

#include <cstdint>
#include <cstring>

namespace mirrored::testing_util {

inline float RoundBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

inline float RoundFp16(float v) { return float(static_cast<_Float16>(v)); }

}  // namespace mirrored::testing_util
