// The supervisor's pure pieces: which failure is the job's (JudgeOutcome),
// the task an exit 3 blames and the failure report, and the per-task
// pieces of a run (whether an exit was ours, the liveness pipe).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "common/task_interrupt.h"
#include "launcher/process/failure_report.h"
#include "launcher/process/job_outcome.h"
#include "launcher/process/running_task.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;

const auto kT0 = std::chrono::system_clock::time_point(std::chrono::hours(24 * 365 * 50));

TaskResult Exited(const std::string& name, int code, std::chrono::milliseconds after, bool training = true) {
  TaskResult r;
  r.name = name;
  r.is_training = training;
  r.exit.exit_code = code;
  r.ended_at = kT0 + after;
  return r;
}

TEST(JobSupervisorPartsTest, AGenuineFailureIsTheRootCauseEvenWhenReapedLater) {
  JobOutcome o;
  o.tasks = {Exited("worker:0", kExitPeerFailed, 10ms), Exited("worker:1", kExitPreempted, 20ms),
             Exited("chief:0", 1, 30ms)};
  JudgeOutcome(o);
  ASSERT_TRUE(o.first_failure);
  EXPECT_EQ(o.first_failure->name, "chief:0");
  EXPECT_EQ(o.exit_code, 1);
}

TEST(JobSupervisorPartsTest, PreemptionComesBeforePeerFailedAndTheEarliestOfEachWins) {
  JobOutcome o;
  o.tasks = {Exited("worker:0", kExitPeerFailed, 5ms), Exited("worker:1", kExitPreempted, 30ms),
             Exited("chief:0", kExitPreempted, 20ms)};
  JudgeOutcome(o);
  EXPECT_EQ(o.first_failure->name, "chief:0");
  EXPECT_EQ(o.exit_code, kExitPreempted);
  o.tasks = {Exited("worker:0", kExitPeerFailed, 50ms), Exited("worker:1", kExitPeerFailed, 40ms)};
  o.first_failure.reset();
  JudgeOutcome(o);
  EXPECT_EQ(o.first_failure->name, "worker:1");
  EXPECT_EQ(o.exit_code, kExitPeerFailed);
}

TEST(JobSupervisorPartsTest, StoppedTasksAndSuccessesNeverCountAndAStopGivesItsSignalsCode) {
  JobOutcome o;
  TaskResult stopped = Exited("worker:0", 143, 1ms);
  stopped.stopped_by_supervisor = true;
  o.tasks = {Exited("chief:0", 0, 2ms), stopped};
  JudgeOutcome(o);
  EXPECT_FALSE(o.first_failure);
  EXPECT_EQ(o.exit_code, 0);
  o.stop_signal = SIGINT;
  o.tasks.push_back(Exited("evaluator", 1, 3ms, /*training=*/false));
  JudgeOutcome(o);
  EXPECT_FALSE(o.first_failure);  // an evaluator's failure is not the job's once it was stopped
  EXPECT_EQ(o.exit_code, 128 + SIGINT);
}

TEST(JobSupervisorPartsTest, AFailedEvaluatorFailsAJobWhoseTrainingSucceeded) {
  JobOutcome o;
  o.tasks = {Exited("chief:0", 0, 1ms), Exited("evaluator", 4, 2ms, /*training=*/false)};
  JudgeOutcome(o);
  ASSERT_TRUE(o.first_failure);
  EXPECT_EQ(o.first_failure->name, "evaluator");
  EXPECT_EQ(o.exit_code, 4);
}

TEST(JobSupervisorPartsTest, AnExitThreeBlamesTheTaskItsLastLinesName) {
  TaskResult r = Exited("worker:0", kExitPeerFailed, 0ms);
  r.last_lines = {"task worker:0 failed at X: itself", "error: task worker:1 failed at 2026-11-23T00:00:00Z: exited "
                                                        "with error: INVALID_ARGUMENT: --lr -1 must be positive"};
  std::optional<BlamedTask> blamed = BlamedBy(r);
  ASSERT_TRUE(blamed);
  EXPECT_EQ(blamed->task, "worker:1");
  EXPECT_TRUE(blamed->configuration_error);
  EXPECT_FALSE(blamed->interrupted);

  r.last_lines = {"task chief:0 failed at T: exited with error: CANCELLED: " + std::string(kInterruptedOnItsHost)};
  blamed = BlamedBy(r);
  ASSERT_TRUE(blamed);
  EXPECT_EQ(blamed->task, "chief:0");
  EXPECT_TRUE(blamed->interrupted);
  EXPECT_FALSE(blamed->configuration_error);

  r.last_lines = {"the coordination service at 10.0.0.1:2222 (hosted by task chief:0) has not answered heartbeats"};
  EXPECT_EQ(BlamedBy(r)->task, "chief:0");
  r.last_lines = {"task worker:0 failed at X: its own"};  // only itself
  EXPECT_FALSE(BlamedBy(r));
  EXPECT_FALSE(BlamedBy(Exited("worker:0", 1, 0ms)));  // not an exit 3
}

TEST(JobSupervisorPartsTest, TheReportNamesTheFirstFailureTheOthersAndItsLastLines) {
  JobOutcome o;
  TaskResult stopped = Exited("worker:1", 143, 2ms);
  stopped.stopped_by_supervisor = true;
  o.tasks = {Exited("chief:0", 1, 1ms), stopped};
  o.tasks[0].last_lines = {"boom"};
  JudgeOutcome(o);
  const std::string report = FormatFailureReport(o);
  EXPECT_NE(report.find("==== job failed ====\nfirst failure: task chief:0 ended with exit code 1 at "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("  worker:1: exit code 143 (stopped by the launcher)\n"), std::string::npos) << report;
  EXPECT_NE(report.find("last line of chief:0:\n  | boom\n"), std::string::npos) << report;
  EXPECT_EQ(FormatFailureReport(JobOutcome{}), "");
}

TEST(JobSupervisorPartsTest, AnExitIsOursOnlyWhenItAnswersOurSignal) {
  RunningTask t;
  ProcessExit by_term{.exit_code = std::nullopt, .signal = SIGTERM};
  ProcessExit code1{.exit_code = 1, .signal = std::nullopt};
  ProcessExit code3{.exit_code = kExitPeerFailed, .signal = std::nullopt};
  ProcessExit killed{.exit_code = std::nullopt, .signal = SIGKILL};
  EXPECT_FALSE(EndedBecauseStopped(t, by_term));  // nothing sent
  t.signal_sent = SIGTERM;
  EXPECT_TRUE(EndedBecauseStopped(t, by_term));
  EXPECT_TRUE(EndedBecauseStopped(t, code3));
  EXPECT_TRUE(EndedBecauseStopped(t, ProcessExit{.exit_code = 143, .signal = std::nullopt}));
  EXPECT_FALSE(EndedBecauseStopped(t, code1));
  // A task exits 0 only once its work is done: ending anyway, not stopped.
  EXPECT_FALSE(EndedBecauseStopped(t, ProcessExit{.exit_code = 0, .signal = std::nullopt}));
  EXPECT_FALSE(EndedBecauseStopped(t, killed));  // not killed by us
  t.killed = true;
  EXPECT_TRUE(EndedBecauseStopped(t, killed));
}

TEST(JobSupervisorPartsTest, TheLivenessPipeArmsOnASignOfLifeAndDisarmsOnS) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  RunningTask t;
  t.liveness_fd = fds[0];
  const auto before = t.last_alive;
  ASSERT_EQ(write(fds[1], "hh", 2), 2);
  ReadLiveness(t);
  EXPECT_TRUE(t.liveness_armed);
  EXPECT_GE(t.last_alive, before);
  EXPECT_EQ(t.liveness_fd, fds[0]);  // nothing more yet: still open
  ASSERT_EQ(write(fds[1], "hS", 2), 2);
  ReadLiveness(t);
  EXPECT_FALSE(t.liveness_armed);
  close(fds[1]);
  ReadLiveness(t);
  EXPECT_EQ(t.liveness_fd, -1);  // EOF: closed
}

}  // namespace
}  // namespace mirrored
