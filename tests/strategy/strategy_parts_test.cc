// The strategy's pure pieces: the settings every task publishes and
// compares, and which of the local replicas' results RunReplicas returns.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "worker/strategy/replicas_result.h"
#include "worker/strategy/settings_agreement.h"

namespace mirrored {
namespace {

using Settings = std::vector<std::pair<std::string, std::string>>;

TEST(StrategyPartsTest, SettingsTravelAsJsonPairsInTheirOrder) {
  const Settings settings = {{"--model", "cnn"}, {"--lr", "0.01"}};
  const std::string json = SettingsJson(settings);
  EXPECT_EQ(json, R"([["--model","cnn"],["--lr","0.01"]])");
  const std::map<std::string, std::string> back = ParseSettingsJson(json);
  EXPECT_EQ(back, (std::map<std::string, std::string>{{"--model", "cnn"}, {"--lr", "0.01"}}));
}

TEST(StrategyPartsTest, TextThatIsNoSettingsListGivesNone) {
  EXPECT_TRUE(ParseSettingsJson("not json").empty());
  EXPECT_TRUE(ParseSettingsJson(R"({"--lr": "0.1"})").empty());
  // Entries that are not [string, string] pairs are skipped, the rest kept.
  EXPECT_EQ(ParseSettingsJson(R"([["--lr", 1], ["--a"], ["--b", "x"]])"),
            (std::map<std::string, std::string>{{"--b", "x"}}));
}

TEST(StrategyPartsTest, AgreeingTasksHaveNoDifferences) {
  const Settings settings = {{"--model", "cnn"}, {"--lr", "0.01"}};
  const std::map<std::string, std::string> same = {{"--model", "cnn"}, {"--lr", "0.01"}};
  EXPECT_EQ(SettingsDifferences(settings, {"chief:0", "worker:0"}, {same, same}), "");
}

TEST(StrategyPartsTest, EachDifferingSettingIsNamedWithEveryTasksValue) {
  const Settings settings = {{"--model", "cnn"}, {"--lr", "0.01"}, {"--seed", "1"}};
  const std::map<std::string, std::string> chief = {{"--model", "cnn"}, {"--lr", "0.01"}, {"--seed", "1"}};
  const std::map<std::string, std::string> worker = {{"--model", "cnn"}, {"--lr", "0.1"}};
  EXPECT_EQ(SettingsDifferences(settings, {"chief:0", "worker:0"}, {chief, worker}),
            "--lr (chief:0 0.01, worker:0 0.1); --seed (chief:0 1, worker:0 unset)");
}

TEST(StrategyPartsTest, AConfigurationErrorFoundHereComesBeforeTheJobError) {
  const Status peer = AbortedError("task worker:1 failed at X: y");
  EXPECT_EQ(RunReplicasResult({AbortedError("echo"), InvalidArgumentError("--lr diverged")}, peer).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunReplicasResult({UnavailableError("connection reset"), AbortedError("echo")}, peer).message(),
            peer.message());  // the peer's failure explains the lost connection
}

TEST(StrategyPartsTest, TheRootCauseComesBeforeItsAbortedEchoes) {
  EXPECT_EQ(RunReplicasResult({AbortedError("echo"), InternalError("replica 1: boom"), OkStatus()}, OkStatus())
                .message(),
            "replica 1: boom");
  EXPECT_EQ(RunReplicasResult({OkStatus(), AbortedError("echo")}, OkStatus()).message(), "echo");
  EXPECT_TRUE(RunReplicasResult({OkStatus(), OkStatus()}, OkStatus()).ok());
  EXPECT_TRUE(RunReplicasResult({}, OkStatus()).ok());
}

}  // namespace
}  // namespace mirrored
