#include "common/status.h"

#include <gtest/gtest.h>

namespace mirrored {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd value " + std::to_string(x));
  return x / 2;
}

Status QuarterInto(int x, int* out) {
  MIRRORED_ASSIGN_OR_RETURN(int h, Half(x));
  MIRRORED_ASSIGN_OR_RETURN(*out, Half(h));
  return OkStatus();
}

TEST(StatusTest, OkAndErrorsPrint) {
  EXPECT_EQ(OkStatus().ToString(), "OK");
  EXPECT_EQ(DeadlineExceededError("waited 5s").ToString(), "DEADLINE_EXCEEDED: waited 5s");
  EXPECT_EQ(NotFoundError("x").WithContext("reading ckpt").message(), "reading ckpt: x");
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  int out = -1;
  EXPECT_TRUE(QuarterInto(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = QuarterInto(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd value 3");
}

TEST(StatusTest, ExitCodesFollowDesign) {
  EXPECT_EQ(ExitCodeFor(OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(InvalidArgumentError("")), 2);
  EXPECT_EQ(ExitCodeFor(PermissionDeniedError("")), 2);
  EXPECT_EQ(ExitCodeFor(AbortedError("")), 3);
  EXPECT_EQ(ExitCodeFor(DeadlineExceededError("")), 4);
  EXPECT_EQ(ExitCodeFor(InternalError("")), 1);
  EXPECT_EQ(ExitCodeFor(UnavailableError("")), 1);
}

}  // namespace
}  // namespace mirrored

namespace mirrored {
namespace {

// A file system error met while the job runs is not bad usage: exit 1, which
// the launcher retries, not 2, which it never does.
TEST(StatusTest, WhileRunningTurnsUsageCodesIntoExitOne) {
  Status denied = WhileRunning(PermissionDeniedError("create run/checkpoints/x: Read-only file system"));
  EXPECT_EQ(ExitCodeFor(denied), kExitFailure);
  EXPECT_EQ(denied.message(), "create run/checkpoints/x: Read-only file system (while the job ran)");
  EXPECT_EQ(ExitCodeFor(WhileRunning(NotFoundError("gone"))), kExitFailure);
  EXPECT_EQ(WhileRunning(DeadlineExceededError("slow")).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(WhileRunning(AbortedError("peer")).code(), StatusCode::kAborted);
  EXPECT_TRUE(WhileRunning(OkStatus()).ok());
}

}  // namespace
}  // namespace mirrored
