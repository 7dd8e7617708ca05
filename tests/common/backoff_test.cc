#include "common/backoff.h"

#include <gtest/gtest.h>

#include <climits>

namespace mirrored {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesFromTheFirstPauseUpToTheLongest) {
  const Backoff b{milliseconds(1000), milliseconds(30000)};
  EXPECT_EQ(b.Pause(0), milliseconds(1000));
  EXPECT_EQ(b.Pause(1), milliseconds(2000));
  EXPECT_EQ(b.Pause(3), milliseconds(8000));
  EXPECT_EQ(b.Pause(4), milliseconds(16000));
  EXPECT_EQ(b.Pause(5), milliseconds(30000));
  EXPECT_EQ(b.Pause(INT_MAX), milliseconds(30000));
}

TEST(BackoffTest, AZeroFirstPauseStaysZeroAndAFirstPastTheLongestIsCut) {
  EXPECT_EQ((Backoff{milliseconds(0), milliseconds(30000)}.Pause(7)), milliseconds(0));
  EXPECT_EQ((Backoff{milliseconds(5000), milliseconds(1000)}.Pause(0)), milliseconds(1000));
}

static_assert(Backoff{milliseconds(50), milliseconds(1000)}.Pause(2) == milliseconds(200));

}  // namespace
}  // namespace mirrored
