#include "common/signal_name.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace mirrored {
namespace {

// One form in every message of the launcher and the worker: the name, for
// a reader, and the number, which exit codes (128 + N) carry.
TEST(SignalNameTest, NamesTheSignalAndItsNumber) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM (15)");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT (2)");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL (9)");
  EXPECT_EQ(SignalName(SIGRTMIN + 30), "signal " + std::to_string(SIGRTMIN + 30));  // no name of its own
}

}  // namespace
}  // namespace mirrored
