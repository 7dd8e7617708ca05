// JudgeTaskClaim: a process registering as a task another process holds,
// judged from the task's state, the claim and the time alone.
#include "worker/coordination/task_claim.h"

#include <gtest/gtest.h>

namespace mirrored::coordination {
namespace {

using Kind = ClaimVerdict::Kind;

constexpr ClaimRules kRunning{.job_formed = true, .heartbeat_timeout = std::chrono::seconds(1)};
constexpr ClaimRules kForming{.job_formed = false, .heartbeat_timeout = std::chrono::seconds(1)};

// worker:0's process (incarnation 2, on 10.0.0.2) runs: it heartbeat at
// 10000 and holds its error poll.
ClaimedTask Running() {
  return {.name = "worker:0",
          .state = TaskState::kConnected,
          .incarnation = 2,
          .host = "10.0.0.2",
          .last_heartbeat_ms = 10000,
          .polling = true};
}

// A first-run process from the task's own host.
TaskClaim FromItsHost(uint64_t incarnation = 3) { return {.incarnation = incarnation, .host = "10.0.0.2"}; }

bool Says(const ClaimVerdict& v, const std::string& text) {
  return v.answer.message().find(text) != std::string::npos;
}

TEST(TaskClaimTest, TheSameProcessAgainIsAnsweredTheView) {
  EXPECT_EQ(JudgeTaskClaim(Running(), FromItsHost(2), kRunning, 10100).kind, Kind::kSameProcess);
  TaskClaim restarted = FromItsHost(2);
  restarted.restarted = true;
  EXPECT_EQ(JudgeTaskClaim(Running(), restarted, kRunning, 10100).kind, Kind::kSameProcess);
}

TEST(TaskClaimTest, AnotherHostIsRefusedWhileTheTaskHeartbeatsAndIsARestartOnceSilent) {
  const TaskClaim other{.incarnation = 3, .host = "10.0.0.3"};
  const ClaimVerdict refused = JudgeTaskClaim(Running(), other, kRunning, 10400);
  EXPECT_EQ(refused.kind, Kind::kRefuse);
  EXPECT_EQ(refused.answer.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Says(refused, "task worker:0 is already running, registered from 10.0.0.2 (its last heartbeat 400 ms "
                            "ago); this second process claiming it, from 10.0.0.3, is refused"))
      << refused.answer;
  EXPECT_TRUE(Says(refused, "check TF_CONFIG's \"task\" on 10.0.0.3")) << refused.answer;
  // Silent for the heartbeat timeout (below 2 s here): a restart elsewhere.
  const ClaimVerdict moved = JudgeTaskClaim(Running(), other, kRunning, 11000);
  EXPECT_EQ(moved.kind, Kind::kRestart);
  EXPECT_EQ(moved.failure, "restarted with a new incarnation 3 (was 2); the job must restart from its last checkpoint");
  // With a longer heartbeat timeout, 2 s of silence is enough.
  constexpr ClaimRules kLongHeartbeat{.job_formed = true, .heartbeat_timeout = std::chrono::seconds(5)};
  EXPECT_EQ(JudgeTaskClaim(Running(), other, kLongHeartbeat, 11999).kind, Kind::kRefuse);
  EXPECT_EQ(JudgeTaskClaim(Running(), other, kLongHeartbeat, 12000).kind, Kind::kRestart);
}

TEST(TaskClaimTest, ASecondProcessFromItsHostWaitsOneHeartbeatTimeoutFromItsFirstAnswer) {
  const ClaimVerdict first = JudgeTaskClaim(Running(), FromItsHost(), kRunning, 10200);
  EXPECT_EQ(first.kind, Kind::kWait);
  EXPECT_EQ(first.first_told_to_wait_ms, 10200);
  EXPECT_EQ(first.answer.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Says(first, "task worker:0: " + std::string(kPreviousProcessStillRunning) +
                              " (on 10.0.0.2, last heartbeat 200 ms ago, still connected); this new process waits up "
                              "to 1000 ms for it to end"))
      << first.answer;

  TaskClaim told = FromItsHost();
  told.told_to_wait_ms = 10200;
  ClaimedTask heartbeating = Running();
  heartbeating.last_heartbeat_ms = 11100;
  const ClaimVerdict again = JudgeTaskClaim(heartbeating, told, kRunning, 11199);
  EXPECT_EQ(again.kind, Kind::kWait);
  EXPECT_EQ(again.first_told_to_wait_ms, 10200);  // its wait does not start over
  const ClaimVerdict refused = JudgeTaskClaim(heartbeating, told, kRunning, 11200);
  EXPECT_EQ(refused.kind, Kind::kRefuse);
  EXPECT_EQ(refused.answer.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Says(refused, "task worker:0 is still running: its process on 10.0.0.2 kept heartbeating and stayed "
                            "connected for the 1000 ms this second process waited"))
      << refused.answer;
  EXPECT_TRUE(Says(refused, "stop the other process running it on 10.0.0.2")) << refused.answer;
}

// Unknown hosts (tests, or a peer gRPC cannot name) count as the same host.
TEST(TaskClaimTest, AnUnknownHostIsTheTasksOwn) {
  ClaimedTask unknown = Running();
  unknown.host = "";
  EXPECT_EQ(JudgeTaskClaim(unknown, {.incarnation = 3}, kRunning, 10100).kind, Kind::kWait);
  EXPECT_TRUE(Says(JudgeTaskClaim(unknown, {.incarnation = 3}, kRunning, 10100), "(on ?, last heartbeat"));
}

TEST(TaskClaimTest, ALaunchersRestartOrATaskWithoutItsErrorPollIsARestart) {
  TaskClaim restarted = FromItsHost();
  restarted.restarted = true;
  EXPECT_EQ(JudgeTaskClaim(Running(), restarted, kRunning, 10100).kind, Kind::kRestart);
  ClaimedTask not_polling = Running();
  not_polling.polling = false;  // its process died: the poll was cancelled
  EXPECT_EQ(JudgeTaskClaim(not_polling, FromItsHost(), kRunning, 10100).kind, Kind::kRestart);
  EXPECT_EQ(JudgeTaskClaim(Running(), FromItsHost(), kRunning, 11000).kind, Kind::kRestart);  // silent
}

TEST(TaskClaimTest, PastSixteenWaitingANewcomerIsRefusedAtOnce) {
  ClaimedTask crowded = Running();
  crowded.waiting_claims = kMaxWaitingClaims;
  const ClaimVerdict refused = JudgeTaskClaim(crowded, FromItsHost(), kRunning, 10100);
  EXPECT_EQ(refused.kind, Kind::kRefuse);
  EXPECT_TRUE(Says(refused, "task worker:0 is still running on 10.0.0.2, and 16 other processes claiming it already "
                            "wait for it to end"))
      << refused.answer;
  TaskClaim told = FromItsHost();
  told.told_to_wait_ms = 10000;  // one of them
  EXPECT_EQ(JudgeTaskClaim(crowded, told, kRunning, 10100).kind, Kind::kWait);
  crowded.waiting_claims = kMaxWaitingClaims - 1;
  EXPECT_EQ(JudgeTaskClaim(crowded, FromItsHost(), kRunning, 10100).kind, Kind::kWait);
}

TEST(TaskClaimTest, AClaimOnATaskInItsExitBarrierIsToldTheJobHasEnded) {
  for (const TaskState state : {TaskState::kShuttingDown, TaskState::kShutdown}) {
    ClaimedTask ending = Running();
    ending.state = state;
    TaskClaim told = FromItsHost();
    told.told_to_wait_ms = 10000;
    const ClaimVerdict waited = JudgeTaskClaim(ending, told, kRunning, 10100);
    EXPECT_EQ(waited.kind, Kind::kRefuse) << TaskStateName(state);
    EXPECT_EQ(waited.answer.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Says(waited, "task worker:0: the job that ran it has ended: its process on 10.0.0.2 reached the exit "
                             "barrier (the job finished, or stopped on a signal), while this second process waited "
                             "for the task's process to end; this process claiming it, from 10.0.0.2, has no job to "
                             "join"))
        << waited.answer;
    const ClaimVerdict other = JudgeTaskClaim(ending, {.incarnation = 3, .host = "10.0.0.3"}, kRunning, 10100);
    EXPECT_EQ(other.kind, Kind::kRefuse);
    EXPECT_FALSE(Says(other, "while this second process waited")) << other.answer;
    TaskClaim restarted = FromItsHost();
    restarted.restarted = true;  // its process died in the exit barrier: as before, a restart
    EXPECT_EQ(JudgeTaskClaim(ending, restarted, kRunning, 10100).kind, Kind::kRestart);
  }
}

TEST(TaskClaimTest, BeforeTheJobFormsAClaimFromOffTheListedIpIsRefusedElseItReplaces) {
  ClaimedTask listed = Running();
  listed.host_listed = true;
  const TaskClaim elsewhere{.incarnation = 3, .host = "10.0.0.1"};
  const ClaimVerdict refused = JudgeTaskClaim(listed, elsewhere, kForming, 0);
  EXPECT_EQ(refused.kind, Kind::kRefuse);
  EXPECT_TRUE(Says(refused, "task worker:0 is already registered from 10.0.0.2, its address in the cluster; this "
                            "second process claiming it, from 10.0.0.1, is refused"))
      << refused.answer;
  // From the listed IP itself, from an unknown host, or where the cluster
  // gives a name: a restart cannot be told apart, the newcomer replaces it.
  TaskClaim from_listed = elsewhere;
  from_listed.host_listed = true;
  EXPECT_EQ(JudgeTaskClaim(listed, from_listed, kForming, 0).kind, Kind::kReplace);
  EXPECT_EQ(JudgeTaskClaim(listed, {.incarnation = 3}, kForming, 0).kind, Kind::kReplace);
  EXPECT_EQ(JudgeTaskClaim(Running(), elsewhere, kForming, 0).kind, Kind::kReplace);
  // The same process again, or a task no process holds yet: it registers.
  EXPECT_EQ(JudgeTaskClaim(listed, {.incarnation = 2, .host = "10.0.0.2"}, kForming, 0).kind, Kind::kRegister);
  EXPECT_EQ(JudgeTaskClaim({.name = "worker:0"}, elsewhere, kForming, 0).kind, Kind::kRegister);
}

}  // namespace
}  // namespace mirrored::coordination
