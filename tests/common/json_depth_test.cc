#include "common/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace mirrored {
namespace {

std::string Nested(size_t levels, char open, char close) {
  return std::string(levels, open) + std::string(levels, close);
}

TEST(JsonDepthTest, NestingUpToTheLimitPasses) {
  EXPECT_EQ(JsonNestingPastLimit(R"({"a": [1, {"b": [[2]]}], "c": "d"})"), std::nullopt);
  EXPECT_EQ(JsonNestingPastLimit(Nested(kMaxJsonDepth, '[', ']')), std::nullopt);
  EXPECT_EQ(JsonNestingPastLimit(""), std::nullopt);
}

TEST(JsonDepthTest, TheFirstBracketPastTheLimitIsNamed) {
  EXPECT_EQ(JsonNestingPastLimit(Nested(kMaxJsonDepth + 1, '[', ']')), kMaxJsonDepth);
  EXPECT_EQ(JsonNestingPastLimit(R"({"a": {"b": 1}})", 1), 6u);
  // Deep after shallow: the depth falls back between siblings.
  EXPECT_EQ(JsonNestingPastLimit("[[1],[2],[[3]]]", 2), 10u);
  const std::string hostile = "{\"a\":" + Nested(100000, '[', ']') + "}";
  EXPECT_EQ(JsonNestingPastLimit(hostile), 5u + kMaxJsonDepth - 1);
}

TEST(JsonDepthTest, BracketsInsideStringsDoNotCount) {
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  EXPECT_EQ(JsonNestingPastLimit(in_string), std::nullopt);
  // An escaped backslash ends the escape: the quote after it closes the string.
  EXPECT_EQ(JsonNestingPastLimit("[\"\\\\\",[[1]]]", 2), 7u);
}

TEST(JsonDepthTest, TheMessageNamesTheLimitAndThePlace) {
  EXPECT_EQ(JsonTooDeepMessage(7, 512).find("nests more than 512 levels deep (at byte 7)"), 0u);
}

}  // namespace
}  // namespace mirrored
