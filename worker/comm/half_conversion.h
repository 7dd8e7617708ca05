// FP32 <-> bf16 / fp16 on the CPU, and the loops the CPU transports build
// the 16-bit all-reduce from (wire_type.h has the rule they implement).
// Rounding is IEEE's: to nearest, ties to even; NaN stays NaN (quiet);
// values past the largest finite one become infinity; fp16 keeps
// subnormals. 16-bit values are their bit patterns in uint16_t.
//
//   uint16_t b = FloatToBf16(1.0f);                    // 0x3f80
//   RoundToWire(WireType::kFp16, grads, n);            // grads[i] = fp16(grads[i]), as floats
//   AddRoundedToWire(WireType::kBf16, sum, mine, n);   // sum[i] += bf16(mine[i])
#pragma once

#include <cstddef>
#include <cstdint>

#include "worker/comm/wire_type.h"

namespace mirrored {

uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t h);
uint16_t FloatToFp16(float f);
float Fp16ToFloat(uint16_t h);

// For a 16-bit `wire` (kFp32: a plain copy or sum where it applies).
// dst[i] = wire(src[i]).
void NarrowToWire(WireType wire, const float* src, uint16_t* dst, size_t n);
// dst[i] = float(src[i]).
void WidenFromWire(WireType wire, const uint16_t* src, float* dst, size_t n);
// data[i] = float(wire(data[i])): the value the 16-bit type holds, as FP32.
void RoundToWire(WireType wire, float* data, size_t n);
// dst[i] += float(wire(src[i])), in FP32.
void AddRoundedToWire(WireType wire, float* dst, const float* src, size_t n);
// dst[i] += float(src[i]), in FP32.
void AddWidenedFromWire(WireType wire, float* dst, const uint16_t* src, size_t n);
// out[i] = wire(float(a[i]) + float(b[i])): one hop of a 16-bit sum.
void SumOnWire(WireType wire, uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n);
// out[i] = wire(max(float(a[i]), float(b[i]))).
void MaxOnWire(WireType wire, uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n);

}  // namespace mirrored
