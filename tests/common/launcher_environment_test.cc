#include "common/launcher_environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>

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

}  // namespace
}  // namespace mirrored
