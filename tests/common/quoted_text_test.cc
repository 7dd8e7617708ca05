#include "common/quoted_text.h"

#include <gtest/gtest.h>

namespace mirrored {
namespace {

TEST(QuotedTextTest, PrintableTextIsQuotedAndControlBytesEscaped) {
  EXPECT_EQ(QuotedText("h1:2222"), "\"h1:2222\"");
  EXPECT_EQ(QuotedText("say \"hi\" \\ bye"), "\"say \\\"hi\\\" \\\\ bye\"");
  EXPECT_EQ(QuotedText(std::string("h\0evil", 6)), "\"h\\u0000evil\"");
  EXPECT_EQ(QuotedText("\a\x1b[31mRED\x7f"), "\"\\u0007\\u001b[31mRED\\u007f\"");
  EXPECT_EQ(QuotedText("a\nb\tc"), "\"a\\nb\\tc\"");
}

TEST(QuotedTextTest, Utf8PassesAndOtherBytesAreShownInHex) {
  EXPECT_EQ(QuotedText("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(QuotedText("x\xff.json"), "\"x\\xff.json\"");
  EXPECT_EQ(QuotedText("\xc3"), "\"\\xc3\"");              // cut short
  EXPECT_EQ(QuotedText("\xc0\xaf"), "\"\\xc0\\xaf\"");     // overlong "/"
  EXPECT_EQ(QuotedText("\xed\xa0\x80"), "\"\\xed\\xa0\\x80\"");  // a surrogate
  EXPECT_EQ(QuotedText("\xc2\x9b" "2J"), "\"\\u009b2J\"");  // C1 CSI: clears a terminal
}

}  // namespace
}  // namespace mirrored
