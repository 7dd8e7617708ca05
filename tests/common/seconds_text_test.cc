#include "common/seconds_text.h"

#include <gtest/gtest.h>

namespace mirrored {
namespace {

using namespace std::chrono_literals;

TEST(SecondsTextTest, WholeAndFractionalSecondsAsAFlagTakesThem) {
  EXPECT_EQ(SecondsText(300000ms), "300 s");
  EXPECT_EQ(SecondsText(5min), "300 s");
  EXPECT_EQ(SecondsText(2500ms), "2.5 s");
  EXPECT_EQ(SecondsText(250ms), "0.25 s");  // integer division printed "0 s"
  EXPECT_EQ(SecondsText(0ms), "0 s");
  EXPECT_EQ(SecondsText(std::chrono::hours(1000)), "3600000 s");  // not 3.6e+06
}

}  // namespace
}  // namespace mirrored
