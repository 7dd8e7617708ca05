// CRC-32C (Castagnoli), as TFRecord framing and leveldb use it, and the
// "masked" form stored in TFRecord files.
//
//   uint32_t crc = Crc32c(data, size);
//   uint32_t stored = MaskCrc32c(crc);   // what a .tfevents record holds
//   assert(UnmaskCrc32c(stored) == crc);
#pragma once

#include <cstddef>
#include <cstdint>

namespace mirrored {

// CRC of `size` bytes, continuing from `crc` (0 for a fresh CRC). Uses the
// CPU's crc32 instruction where there is one (x86-64 with SSE4.2).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
// The same with lookup tables only (what other CPUs run; tests compare).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

// TFRecord's mask: rotate right by 15 bits and add a constant, so that a CRC
// of data that itself contains CRCs stays informative.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace mirrored
