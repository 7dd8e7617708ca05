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

// All ones where `c` holds: selects by masks, which the vectoriser keeps
// branch-free where nested ?: became control flow.
inline uint32_t Mask(bool c) { return 0u - static_cast<uint32_t>(c); }

// IEEE binary16 in integer and FP32 operations the compiler vectorises
// (F. Giesen's branch-free conversions): _Float16's casts are a libgcc
// call per element on a baseline x86-64 build, 0.1 GB/s. The tests check
// these against _Float16 on every fp16 value and a sweep of floats.
struct Fp16 {
  static uint16_t Narrow(float f) {
    constexpr uint32_t kInfinityAsFp32 = 0x47800000u;  // 65536: rounds to fp16's infinity or beyond
    constexpr uint32_t kSmallestNormal = 0x38800000u;  // 2^-14
    constexpr uint32_t kSubnormalMagic = 0x3f000000u;  // 0.5f: adding it rounds to fp16's subnormal step
    uint32_t u = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    // Normal: rebias the exponent and round to nearest even on the 13
    // dropped bits (a carry into the exponent, up to infinity, is right).
    const uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;  // 0xc8000000: (15 - 127) << 23
    // Subnormal: the FPU's own rounding, by adding 0.5 and keeping the low bits.
    const uint32_t subnormal =
        std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kSubnormalMagic)) - kSubnormalMagic;
    const uint32_t special = 0x7c00u | (Mask(u > 0x7f800000u) & 0x0200u);  // infinity, or a quiet NaN
    const uint32_t big = Mask(u >= kInfinityAsFp32), small = Mask(u < kSmallestNormal);
    const uint32_t h = (big & special) | (~big & small & subnormal) | (~big & ~small & normal);
    return static_cast<uint16_t>(h | sign);
  }
  static float Widen(uint16_t h) {
    constexpr uint32_t kExponent = 0x7c00u << 13;  // fp16's exponent field, where FP32's sits
    uint32_t u = static_cast<uint32_t>(h & 0x7fffu) << 13;
    const uint32_t exponent = u & kExponent;
    u += (127 - 15) << 23;  // rebias
    const uint32_t special = u + ((128 - 16) << 23);  // infinity or NaN: FP32's all-ones exponent
    // Subnormal: the value as a normal float with an implied 1, less that 1 (2^-14).
    const uint32_t subnormal =
        std::bit_cast<uint32_t>(std::bit_cast<float>(u + (1u << 23)) - std::bit_cast<float>(113u << 23));
    const uint32_t top = Mask(exponent == kExponent), zero = Mask(exponent == 0);
    const uint32_t w = (top & special) | (zero & subnormal) | (~top & ~zero & u);
    return std::bit_cast<float>(w | (static_cast<uint32_t>(h & 0x8000u) << 16));
  }
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
