// The supervisor's pure pieces: which failure is the job's (JudgeOutcome),
// the task an exit 3 blames and the failure report, and the per-task
// pieces of a run (whether an exit was ours, the liveness pipe).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/task_interrupt.h"
#include "launcher/process/failure_report.h"
#include "launcher/process/job_outcome.h"
#include "launcher/process/process_group_cpu.h"
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

namespace mirrored {
namespace {

TEST(JobSupervisorPartsExtraTest, AHungTaskFailsTheJobWithTheTimeoutCode) {
  JobOutcome o;
  TaskResult hung = Exited("worker:0", 0, 5ms);
  hung.exit.exit_code.reset();
  hung.exit.signal = SIGTERM;
  hung.hung = "it printed nothing";
  TaskResult stopped = Exited("worker:1", 143, 6ms);
  stopped.stopped_by_supervisor = true;
  o.tasks = {hung, stopped};
  JudgeOutcome(o);
  ASSERT_TRUE(o.first_failure.has_value());
  EXPECT_EQ(o.first_failure->name, "worker:0");
  EXPECT_EQ(o.exit_code, kExitTimeout);
}

TEST(JobSupervisorPartsExtraTest, TheErrorFileGivesTorchsMessageOrNothing) {
  const std::string path = testing::TempDir() + "/error-" + std::to_string(getpid()) + ".json";
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  write(R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "Traceback...", "timestamp": "1"}}})");
  EXPECT_EQ(ErrorFileMessage(path), "ValueError: bad");
  write(R"({"message": "a plain one"})");
  EXPECT_EQ(ErrorFileMessage(path), "a plain one");
  std::string many = "L0";
  for (int i = 1; i < 20; ++i) many += "\\n L" + std::to_string(i);
  write(R"({"message": {"message": ")" + many + R"("}})");
  auto first = ErrorFileMessage(path);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->substr(0, 6), "L0\n L1");
  EXPECT_EQ(first->substr(first->size() - 3), "...");
  EXPECT_EQ(std::count(first->begin(), first->end(), '\n'), 8);
  for (const char* bad : {"", "not json", "[1]", R"({"message": 3})", R"({"other": "x"})", R"({"message": ""})"}) {
    write(bad);
    EXPECT_FALSE(ErrorFileMessage(path).has_value()) << bad;
  }
  std::remove(path.c_str());
  EXPECT_FALSE(ErrorFileMessage(path).has_value());
}

TEST(JobSupervisorPartsExtraTest, CpuTicksSumTheGroupsProcessesOnly) {
  const std::string proc = testing::TempDir() + "/proc-" + std::to_string(getpid());
  std::filesystem::create_directories(proc + "/self");
  auto stat = [&](const std::string& pid, const std::string& line) {
    std::filesystem::create_directories(proc + "/" + pid);
    std::ofstream(proc + "/" + pid + "/stat") << line << "\n";
  };
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
  stat("100", "100 (python3) S 1 100 1 0 -1 0 0 0 0 0 50 20 3 2 20 0 1 0");
  stat("101", "101 (a (b) c) R 100 100 1 0 -1 0 0 0 0 0 7 1 0 0 20 0 1 0");  // ")" in its name
  stat("102", "102 (other) S 1 102 1 0 -1 0 0 0 0 0 999 999 0 0 20 0 1 0");  // another group
  stat("103", "garbage");
  EXPECT_EQ(ProcessGroupCpuTicks(100, proc), 50 + 20 + 3 + 2 + 7 + 1);
  EXPECT_FALSE(ProcessGroupCpuTicks(555, proc).has_value());
  EXPECT_FALSE(ProcessGroupCpuTicks(100, proc + "/none").has_value());
  std::filesystem::remove_all(proc);
  // The real one: this process's group has used some CPU.
  EXPECT_TRUE(ProcessGroupCpuTicks(getpgrp()).has_value());
  EXPECT_GT(CpuTicksPerSecond(), 0);
}

}  // namespace
}  // namespace mirrored
