// DecimalInteger: an integer flag takes decimal digits within its range, and
// refuses, naming the flag, what CLI11 alone would turn into another number.
#include "common/decimal_integer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mirrored {
namespace {

// The value `text` gives a flag of type T with the validator, or the error.
template <typename T>
std::string Parse(const std::string& text, T min = std::numeric_limits<T>::min(),
                  T max = std::numeric_limits<T>::max()) {
  CLI::App app;
  T value{};
  app.add_option("--n", value)->transform(DecimalInteger<T>(min, max));
  std::vector<std::string> args = {text, "--n"};  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return std::string("error: ") + e.what();
  }
  return std::to_string(value);
}

TEST(DecimalIntegerTest, TakesDecimalDigitsWithinTheTypesRange) {
  EXPECT_EQ(Parse<int>("42"), "42");
  EXPECT_EQ(Parse<int>("+7"), "7");
  EXPECT_EQ(Parse<int>("-5"), "-5");
  EXPECT_EQ(Parse<int>("-2147483648"), "-2147483648");
  EXPECT_EQ(Parse<int>("2147483647"), "2147483647");
  EXPECT_EQ(Parse<int64_t>("-9223372036854775808"), "-9223372036854775808");
  EXPECT_EQ(Parse<uint64_t>("18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(Parse<uint64_t>("-0"), "0");
  // Decimal, as argparse reads it: CLI11 alone takes 010 for octal 8.
  EXPECT_EQ(Parse<int>("010"), "10");
}

TEST(DecimalIntegerTest, RefusesNegativesForUnsignedAndNumbersPastTheRange) {
  // CLI11 alone: 18446744073709551615 (strtoull negates), then the type's
  // largest value for the others (strtoll/strtoull saturate).
  EXPECT_EQ(Parse<uint64_t>("-1"), "error: --n: -1 is out of range: 0 to 18446744073709551615");
  EXPECT_EQ(Parse<uint64_t>("99999999999999999999"),
            "error: --n: 99999999999999999999 is out of range: 0 to 18446744073709551615");
  EXPECT_EQ(Parse<int64_t>("9223372036854775808"),
            "error: --n: 9223372036854775808 is out of range: -9223372036854775808 to 9223372036854775807");
  EXPECT_EQ(Parse<int64_t>("-9223372036854775809"),
            "error: --n: -9223372036854775809 is out of range: -9223372036854775808 to 9223372036854775807");
  EXPECT_EQ(Parse<int>("2147483648"), "error: --n: 2147483648 is out of range: -2147483648 to 2147483647");
  EXPECT_EQ(Parse<uint64_t>("9223372036854775808", 0, INT64_MAX),
            "error: --n: 9223372036854775808 is out of range: 0 to 9223372036854775807");
  EXPECT_EQ(Parse<uint64_t>("9223372036854775807", 0, INT64_MAX), "9223372036854775807");
}

TEST(DecimalIntegerTest, RefusesWhatIsNotADecimalInteger) {
  for (const char* bad : {"1.5", "abc", "", "-", "0x10", "1e3", "12abc", "--3"}) {
    EXPECT_EQ(Parse<int64_t>(bad), std::string("error: --n: \"") + bad + "\" is not an integer") << bad;
  }
}

}  // namespace
}  // namespace mirrored
