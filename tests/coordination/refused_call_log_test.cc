// RefusedCallLog: calls refused for the job token, counted by host and
// named in the registration timeout.
#include "worker/coordination/refused_call_log.h"

#include <gtest/gtest.h>

namespace mirrored::coordination {
namespace {

TEST(CoordinationRefusedCallLogTest, NothingRefusedSaysNothing) {
  RefusedCallLog log;
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(log.Describe(), "");
}

TEST(CoordinationRefusedCallLogTest, NamesEveryHostWithItsCalls) {
  RefusedCallLog log;
  log.Note("10.0.0.3");
  log.Note("10.0.0.2");
  log.Note("10.0.0.3");
  EXPECT_FALSE(log.empty());
  EXPECT_EQ(log.Describe(),
            "; calls refused for a missing or wrong job token came from 10.0.0.2 (1 call), 10.0.0.3 (2 calls): every "
            "task of the job needs the same MIRRORED_JOB_TOKEN");
}

TEST(CoordinationRefusedCallLogTest, CountsAtMostSixteenHosts) {
  RefusedCallLog log;
  for (int i = 0; i < 20; ++i) log.Note("10.0.0." + std::to_string(10 + i));
  log.Note("10.0.0.10");  // a host already counted still is
  const std::string text = log.Describe();
  EXPECT_NE(text.find("10.0.0.10 (2 calls)"), std::string::npos) << text;
  EXPECT_NE(text.find("10.0.0.25 (1 call)"), std::string::npos) << text;
  EXPECT_EQ(text.find("10.0.0.26"), std::string::npos) << text;
}

}  // namespace
}  // namespace mirrored::coordination
