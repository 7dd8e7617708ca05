#include "worker/comm/half_conversion.h"

#include <algorithm>
#include <bit>

#include "common/cpu_simd_clones.h"

namespace mirrored {
namespace {

// Each type's conversions as static members, so that the loops below
// dispatch on the type once and keep the conversion inline, where the
// compiler can vectorise it.
struct Bf16 {
  static uint16_t Narrow(float f) {
    const auto u = std::bit_cast<uint32_t>(f);
    // Round to nearest even on the 16 bits dropped; a carry out of the
    // mantissa bumps the exponent, and past the largest finite value gives
    // infinity, as IEEE rounding does. A NaN keeps its sign and top payload
    // bits, made quiet so that dropping the rest cannot make it infinity.
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
  static float Widen(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
};

// _Float16 is IEEE binary16 with the compiler's correctly rounded
// conversions (F16C where the target has it, libgcc otherwise).
struct Fp16 {
  static uint16_t Narrow(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
  static float Widen(uint16_t u) { return static_cast<float>(std::bit_cast<_Float16>(u)); }
};

template <typename Fn>
void ForWire(WireType wire, Fn&& fn) {
  if (wire == WireType::kFp16) {
    fn(Fp16{});
  } else {
    fn(Bf16{});
  }
}

}  // namespace

uint16_t FloatToBf16(float f) { return Bf16::Narrow(f); }
float Bf16ToFloat(uint16_t h) { return Bf16::Widen(h); }
uint16_t FloatToFp16(float f) { return Fp16::Narrow(f); }
float Fp16ToFloat(uint16_t h) { return Fp16::Widen(h); }

MIRRORED_SIMD_CLONES void NarrowToWire(WireType wire, const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) dst[i] = T::Narrow(src[i]);
  });
}

MIRRORED_SIMD_CLONES void WidenFromWire(WireType wire, const uint16_t* __restrict src, float* __restrict dst, size_t n) {
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) dst[i] = T::Widen(src[i]);
  });
}

MIRRORED_SIMD_CLONES void RoundToWire(WireType wire, float* data, size_t n) {
  if (wire == WireType::kFp32) return;
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) data[i] = T::Widen(T::Narrow(data[i]));
  });
}

MIRRORED_SIMD_CLONES void AddRoundedToWire(WireType wire, float* __restrict dst, const float* __restrict src, size_t n) {
  if (wire == WireType::kFp32) {
    for (size_t i = 0; i < n; ++i) dst[i] += src[i];
    return;
  }
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) dst[i] += T::Widen(T::Narrow(src[i]));
  });
}

MIRRORED_SIMD_CLONES void AddWidenedFromWire(WireType wire, float* __restrict dst, const uint16_t* __restrict src, size_t n) {
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) dst[i] += T::Widen(src[i]);
  });
}

MIRRORED_SIMD_CLONES void SumOnWire(WireType wire, uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) out[i] = T::Narrow(T::Widen(a[i]) + T::Widen(b[i]));
  });
}

MIRRORED_SIMD_CLONES void MaxOnWire(WireType wire, uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  ForWire(wire, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < n; ++i) out[i] = T::Narrow(std::max(T::Widen(a[i]), T::Widen(b[i])));
  });
}

}  // namespace mirrored
