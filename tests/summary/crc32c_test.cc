#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace mirrored {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 (iSCSI) check values.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  std::string s = "the quick brown fox jumps over the lazy dog, twice over";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32c(s.data(), cut), s.data() + cut, s.size() - cut), Crc32c(s.data(), s.size()));
  }
}

// The crc32 instruction's path and the tables' agree, at every length and
// alignment around the 8-byte steps.
TEST(Crc32cTest, InstructionAndTablesAgree) {
  std::string data(4096 + 16, '\0');
  uint32_t x = 12345;
  for (auto& c : data) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789", 9), 0xE3069283u);
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t size : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 65u, 4096u}) {
      EXPECT_EQ(Crc32cExtend(0xabcdef01u, data.data() + offset, size),
                Crc32cExtendPortable(0xabcdef01u, data.data() + offset, size))
          << "offset " << offset << " size " << size;
    }
  }
}

TEST(Crc32cTest, MaskRoundTrips) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(c)), c);
    if (c != 0) {
      EXPECT_NE(MaskCrc32c(c), c);
    }
  }
}

}  // namespace
}  // namespace mirrored
