// bf16/fp16 conversions (IEEE round to nearest even, NaN, infinity,
// subnormals, fp16's largest value) and the loops the CPU transports build
// the 16-bit all-reduce from; --allreduce-dtype's names.
#include "worker/comm/half_conversion.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace mirrored {
namespace {

float F(uint32_t bits) { return std::bit_cast<float>(bits); }

bool IsFp16NaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool IsBf16NaN(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

TEST(HalfConversionTest, Bf16RoundsToNearestTiesToEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(F(0x3f808000)), 0x3f80);  // 1 + 2^-8: halfway, down to the even 0x3f80
  EXPECT_EQ(FloatToBf16(F(0x3f818000)), 0x3f82);  // 1 + 3 * 2^-8: halfway, up to the even 0x3f82
  EXPECT_EQ(FloatToBf16(F(0x3f808001)), 0x3f81);  // just past halfway: up
  EXPECT_EQ(FloatToBf16(F(0x3f807fff)), 0x3f80);  // just short of it: down
  EXPECT_EQ(FloatToBf16(F(0xbf818000)), 0xbf82);  // the same for negatives
  EXPECT_EQ(Bf16ToFloat(0x3f81), 1.0078125f);
}

TEST(HalfConversionTest, Bf16KeepsNaNAndInfinityAndOverflowsToInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16(-inf), 0xff80);
  EXPECT_EQ(FloatToBf16(F(0x7fc00000)), 0x7fc0);
  // A NaN whose payload lies only in the dropped bits must not become infinity.
  EXPECT_TRUE(IsBf16NaN(FloatToBf16(F(0x7f800001))));
  EXPECT_TRUE(IsBf16NaN(FloatToBf16(F(0xff800001))));
  EXPECT_EQ(FloatToBf16(F(0xff800001)) & 0x8000, 0x8000);  // its sign kept
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // past bf16's largest: infinity
  EXPECT_EQ(FloatToBf16(F(0x7f7f7fff)), 0x7f7f);                     // bf16's largest stays
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0x7fc0)));
}

TEST(HalfConversionTest, Bf16SubnormalsRoundLikeNormals) {
  EXPECT_EQ(FloatToBf16(F(0x00400000)), 0x0040);  // exact
  EXPECT_EQ(FloatToBf16(F(0x00008000)), 0x0000);  // halfway to 0x0001: even
  EXPECT_EQ(FloatToBf16(F(0x00018000)), 0x0002);  // halfway to 0x0002: even
  EXPECT_EQ(FloatToBf16(F(0x00000001)), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
}

TEST(HalfConversionTest, Fp16RoundsToNearestTiesToEven) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // halfway: down to even
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // halfway: up to even
  EXPECT_EQ(FloatToFp16(-1.0f - 3 * std::ldexp(1.0f, -11)), 0xbc02);
  EXPECT_EQ(Fp16ToFloat(0x3c01), 1.0f + std::ldexp(1.0f, -10));
}

TEST(HalfConversionTest, Fp16LargestValueAndOverflow) {
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);  // the largest finite fp16
  EXPECT_EQ(Fp16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(FloatToFp16(65519.0f), 0x7bff);  // below halfway to 65536: stays
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);  // halfway: ties to even, which is infinity
  EXPECT_EQ(FloatToFp16(1e6f), 0x7c00);
  EXPECT_EQ(FloatToFp16(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(IsFp16NaN(FloatToFp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(IsFp16NaN(FloatToFp16(F(0x7f800001))));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(0x7e00)));
}

TEST(HalfConversionTest, Fp16KeepsSubnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // the smallest fp16 subnormal
  EXPECT_EQ(FloatToFp16(tiny), 0x0001);
  EXPECT_EQ(Fp16ToFloat(0x0001), tiny);
  EXPECT_EQ(FloatToFp16(tiny / 2), 0x0000);      // halfway to 0x0001: even
  EXPECT_EQ(FloatToFp16(tiny * 1.5f), 0x0002);   // halfway to 0x0002: even
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -14) - tiny), 0x03ff);
}

// The fp16 conversions are integer arithmetic: the compiler's own
// _Float16 casts (correctly rounded) are the reference.
TEST(HalfConversionTest, Fp16AgreesWithTheCompilersFloat16) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float mine = Fp16ToFloat(static_cast<uint16_t>(h));
    const float theirs = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    if (std::isnan(theirs)) {
      ASSERT_TRUE(std::isnan(mine)) << std::hex << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(mine), std::bit_cast<uint32_t>(theirs)) << std::hex << h;
    }
  }
  // Every float whose low 12 bits are one of a few patterns (ties, just
  // past and short of them, exact values), over every exponent and sign.
  for (uint64_t high = 0; high < (uint64_t{1} << 20); ++high) {
    for (uint32_t low : {0x000u, 0x001u, 0x7ffu, 0x800u, 0x801u, 0xfffu, 0x400u, 0x555u}) {
      for (uint32_t bit12 : {0u, 1u}) {
        const auto bits = static_cast<uint32_t>(high << 12) | low;
        const float f = std::bit_cast<float>(bits ^ (bit12 << 12));
        const uint16_t theirs = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
        const uint16_t mine = FloatToFp16(f);
        if (std::isnan(f)) {
          ASSERT_EQ(mine & 0x7e00, 0x7e00) << f;  // a quiet NaN
          ASSERT_EQ(mine & 0x8000, theirs & 0x8000) << f;
        } else {
          ASSERT_EQ(mine, theirs) << std::hexfloat << f;
        }
      }
    }
  }
}

TEST(HalfConversionTest, LoopsRoundEachContributionAndTheSumOnce) {
  const float a = 1.0f + std::ldexp(1.0f, -9);  // not a bf16: rounds to 1
  std::vector<float> data = {a, a};
  RoundToWire(WireType::kBf16, data.data(), data.size());
  EXPECT_EQ(data, (std::vector<float>{1.0f, 1.0f}));

  std::vector<float> sum = {0.0f};
  AddRoundedToWire(WireType::kBf16, sum.data(), &a, 1);
  AddRoundedToWire(WireType::kBf16, sum.data(), &a, 1);
  EXPECT_EQ(sum[0], 2.0f);  // an FP32 sum of the unrounded values would be 2 + 2^-8
  AddRoundedToWire(WireType::kFp32, sum.data(), &a, 1);
  EXPECT_EQ(sum[0], 2.0f + a);

  std::vector<uint16_t> narrow(2);
  const float values[] = {1.5f, 3.0f};
  NarrowToWire(WireType::kFp16, values, narrow.data(), 2);
  EXPECT_EQ(narrow, (std::vector<uint16_t>{0x3e00, 0x4200}));
  std::vector<float> wide(2, 1.0f);
  AddWidenedFromWire(WireType::kFp16, wide.data(), narrow.data(), 2);
  EXPECT_EQ(wide, (std::vector<float>{2.5f, 4.0f}));
  WidenFromWire(WireType::kFp16, narrow.data(), wide.data(), 2);
  EXPECT_EQ(wide, (std::vector<float>{1.5f, 3.0f}));
}

TEST(HalfConversionTest, OneHopSumsInFp32AndRoundsInPlace) {
  // 1 + 1.5 * 2^-8 (three quarters of bf16's step at 1): up to 0x3f81.
  std::vector<uint16_t> a = {0x3f80, 0x7f7f}, b = {0x3bc0, 0x7f7f};
  SumOnWire(WireType::kBf16, a.data(), a.data(), b.data(), a.size());  // out aliases a, as Gloo does
  EXPECT_EQ(a[0], 0x3f81);
  EXPECT_EQ(a[1], 0x7f80);  // twice the largest bf16: infinity
  std::vector<uint16_t> x = {FloatToFp16(-2.0f)}, y = {FloatToFp16(1.0f)}, m(1);
  MaxOnWire(WireType::kFp16, m.data(), x.data(), y.data(), 1);
  EXPECT_EQ(Fp16ToFloat(m[0]), 1.0f);
}

TEST(WireTypeTest, ParsesTheThreeNamesAndRefusesOthersNamingTheFlag) {
  EXPECT_EQ(*ParseWireType("fp32"), WireType::kFp32);
  EXPECT_EQ(*ParseWireType("bf16"), WireType::kBf16);
  EXPECT_EQ(*ParseWireType("fp16"), WireType::kFp16);
  for (WireType w : {WireType::kFp32, WireType::kBf16, WireType::kFp16}) EXPECT_EQ(*ParseWireType(WireTypeName(w)), w);
  auto bad = ParseWireType("float16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--allreduce-dtype \"float16\""), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("fp32, bf16, fp16"), std::string::npos) << bad.status();
  EXPECT_EQ(WireBytes(WireType::kBf16), 2u);
}

}  // namespace
}  // namespace mirrored
