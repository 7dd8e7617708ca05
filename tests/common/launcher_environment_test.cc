#include "common/launcher_environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace mirrored {
namespace {

TEST(LauncherEnvironmentTest, GenerationIsANonNegativeNumberOrNotUnderTheLauncher) {
  unsetenv(kGenerationVariable);
  EXPECT_EQ(LauncherGeneration(), std::nullopt);
  setenv(kGenerationVariable, "0", 1);
  EXPECT_EQ(LauncherGeneration(), 0);
  setenv(kGenerationVariable, "12", 1);
  EXPECT_EQ(LauncherGeneration(), 12);
  for (const char* bad : {"", "x", "-1", "3x"}) {
    setenv(kGenerationVariable, bad, 1);
    EXPECT_EQ(LauncherGeneration(), std::nullopt) << bad;
  }
  unsetenv(kGenerationVariable);
}

TEST(LauncherEnvironmentTest, TrainingEndedOnlyWhenOne) {
  unsetenv(kTrainingEndedVariable);
  EXPECT_FALSE(LauncherSaysTrainingEnded());
  setenv(kTrainingEndedVariable, "0", 1);
  EXPECT_FALSE(LauncherSaysTrainingEnded());
  setenv(kTrainingEndedVariable, "1", 1);
  EXPECT_TRUE(LauncherSaysTrainingEnded());
  unsetenv(kTrainingEndedVariable);
}

// gRPC aborts the process on a header value with a newline, a tab or a
// byte over 0x7E (and refuses headers over 8 KiB): the token is checked
// first, and the error never repeats the token.
TEST(LauncherEnvironmentTest, JobTokenMustBeAHeaderGrpcCarries) {
  EXPECT_TRUE(CheckJobToken("").ok());
  EXPECT_TRUE(CheckJobToken("0123456789abcdef0123456789abcdef").ok());
  EXPECT_TRUE(CheckJobToken(std::string(kMaxJobTokenBytes, 'A')).ok());
  const Status nl = CheckJobToken("SECRETxyz\n");
  EXPECT_EQ(nl.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nl.message().find("MIRRORED_JOB_TOKEN holds a newline at byte 10 of 10"), std::string::npos) << nl;
  EXPECT_NE(nl.message().find("tr -d"), std::string::npos) << nl;
  EXPECT_EQ(nl.message().find("SECRET"), std::string::npos) << nl;
  EXPECT_NE(CheckJobToken("a\tb").message().find("a tab at byte 2"), std::string::npos);
  EXPECT_NE(CheckJobToken("a b").message().find("a space at byte 2"), std::string::npos);
  EXPECT_NE(CheckJobToken("h\xc3\xa9llo").message().find("the byte 0xC3 at byte 2"), std::string::npos);
  EXPECT_NE(CheckJobToken(std::string("a\0b", 3)).message().find("the byte 0x00 at byte 2"), std::string::npos);
  EXPECT_EQ(CheckJobToken("a\tb").message().find("tr -d"), std::string::npos);  // not a line end
  const Status big = CheckJobToken(std::string(kMaxJobTokenBytes + 1, 'A'));
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("4097 bytes long, more than the 4096"), std::string::npos) << big;
}

}  // namespace
}  // namespace mirrored
