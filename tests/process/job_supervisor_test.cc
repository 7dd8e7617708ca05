#include "launcher/process/job_supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace mirrored {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class JobSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mirrored-supervisor-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    console_fd_ = open((dir_ / "console").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(console_fd_, 0);
    console_ = std::make_unique<ConsoleWriter>(console_fd_);
  }
  void TearDown() override {
    close(console_fd_);
    fs::remove_all(dir_);
  }

  TaskLaunch Shell(const std::string& name, const std::string& script, bool training = true) {
    TaskLaunch t;
    t.name = name;
    t.is_training = training;
    t.argv = {"/bin/sh", "-c", script};
    t.env = {"PATH=/usr/bin:/bin", "DIR=" + dir_.string()};
    t.log_path = (dir_ / (name + ".log")).string();
    return t;
  }
  std::string Slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  const TaskResult& Result(const JobOutcome& o, const std::string& name) {
    for (const auto& r : o.tasks)
      if (r.name == name) return r;
    ADD_FAILURE() << "no task " << name;
    return o.tasks.front();
  }

  fs::path dir_;
  int console_fd_ = -1;
  std::unique_ptr<ConsoleWriter> console_;
};

TEST_F(JobSupervisorTest, SuccessPrefixesEveryLineAndWritesLogs) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s});
  auto outcome = supervisor.Run({Shell("worker:0", "echo a; echo b >&2"),
                                 Shell("worker:1", "printf 'c\\nno-newline'")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->success());
  EXPECT_FALSE(outcome->first_failure.has_value());
  std::string console = Slurp(dir_ / "console");
  EXPECT_NE(console.find("[worker:0] a\n"), std::string::npos) << console;
  EXPECT_NE(console.find("[worker:0] b\n"), std::string::npos) << console;
  EXPECT_NE(console.find("[worker:1] c\n"), std::string::npos) << console;
  EXPECT_NE(console.find("[worker:1] no-newline\n"), std::string::npos) << console;
  // After a dated first line: every run of a job appends to the same log.
  const std::regex header(R"(==== mirrored-launch: worker:[01] started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC ====\n)");
  std::string log0 = Slurp(dir_ / "worker:0.log"), log1 = Slurp(dir_ / "worker:1.log");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log0, m, header) && m.position(0) == 0) << log0;
  EXPECT_EQ(log0.substr(m.length(0)), "a\nb\n");
  ASSERT_TRUE(std::regex_search(log1, m, header) && m.position(0) == 0) << log1;
  EXPECT_EQ(log1.substr(m.length(0)), "c\nno-newline\n");
  EXPECT_EQ(console.find("===="), std::string::npos) << console;  // the log files only
}

TEST_F(JobSupervisorTest, FirstFailureStopsTheOthersAndIsReported) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 60s});
  auto start = std::chrono::steady_clock::now();
  auto outcome = supervisor.Run({Shell("worker:0", "exec sleep 30"),
                                 Shell("worker:1", "echo step 7; echo boom; exit 7")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);  // SIGTERM, not the grace period (nor sleep 30)
  EXPECT_EQ(outcome->exit_code, 7);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:1");
  EXPECT_EQ(outcome->first_failure->last_lines, (std::vector<std::string>{"step 7", "boom"}));
  const TaskResult& w0 = Result(*outcome, "worker:0");
  EXPECT_TRUE(w0.stopped_by_supervisor);
  EXPECT_EQ(w0.exit.signal, SIGTERM);
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("first failure: task worker:1 ended with exit code 7"), std::string::npos)
      << report;
  EXPECT_NE(report.find("worker:0: signal SIGTERM (15) (stopped by the launcher)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("  | boom"), std::string::npos) << report;
}

// A task that the launcher signals but which exits 3 on its own (it had seen
// its peer fail) is reported as that, not as stopped by the launcher.
TEST_F(JobSupervisorTest, AnOtherTaskThatExitsThreeIsNotLabelledAsStoppedByTheLauncher) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "trap 'kill $!; exit 3' TERM; sleep 30 & touch \"$DIR/trapped\"; wait"),
       Shell("worker:1", "i=0; while [ ! -e \"$DIR/trapped\" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; "
                         "echo boom; exit 7")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 7);
  const TaskResult& w0 = Result(*outcome, "worker:0");
  EXPECT_EQ(w0.exit.exit_code, 3);
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("worker:0: exit code 3 (stopped because another task failed)"), std::string::npos) << report;
  EXPECT_EQ(report.find("stopped by the launcher"), std::string::npos) << report;
}

// The chief SIGKILLed from outside after training ended (in its final
// checkpoint, exit barrier or shutdown) while its peer, done too, was still
// exiting: the launcher's SIGTERM reaches the peer, which exits 0 by itself.
// The report names the chief's signal as not the launcher's, and does not
// call the peer's 0 "stopped by the launcher" (it said so before). The peer
// kills the chief itself, so the order is fixed: the chief is gone, and its
// exit reaped, while the peer still runs.
TEST_F(JobSupervisorTest, ChiefKilledAfterTrainingIsReportedAsSuchAndItsFinishedPeerIsNotSaidStopped) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "echo 'exit barrier passed by all 2 tasks'; echo $$ > \"$DIR/pid.tmp\"; "
                         "mv \"$DIR/pid.tmp\" \"$DIR/pid0\"; exec sleep 30"),
       Shell("worker:1", "trap 'kill $!; echo done; exit 0' TERM; "
                         "i=0; while [ ! -e \"$DIR/pid0\" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; "
                         "sleep 30 & kill -9 \"$(cat \"$DIR/pid0\")\"; wait")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 128 + SIGKILL);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:0");
  const TaskResult& w1 = Result(*outcome, "worker:1");
  EXPECT_EQ(w1.exit.exit_code, 0);
  EXPECT_EQ(w1.signal_sent, SIGTERM);
  EXPECT_FALSE(w1.stopped_by_supervisor);
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("first failure: task worker:0 ended with signal SIGKILL (9)"), std::string::npos) << report;
  EXPECT_NE(report.find("(SIGKILL (9) from outside the launcher; every other training task had finished (exit code 0): "
                        "it ended after training"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("worker:1: exit code 0 (it had finished, and ended by itself as the launcher's SIGTERM (15) came)"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("stopped by the launcher"), std::string::npos) << report;
}

// A chief whose disk filled up: the report says so up front (the cause a
// user can fix before the restart), not only in the last lines.
TEST_F(JobSupervisorTest, AFullDiskIsTheReportedCause) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "echo 'step 10/60'; echo 'mirrored-worker: worker:0: error: writing checkpoint /r/ckpt-10: "
                         "write /r/.tmp-ckpt-10-ab/optimizer.safetensors: the file system holding /r is full (No space "
                         "left on device; 12 KiB free of 2.0 MiB): free space there, or use another --run-dir' >&2; "
                         "exit 1"),
       Shell("worker:1", "exec sleep 30")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 1);
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("first failure: task worker:0 ended with exit code 1 at "), std::string::npos) << report;
  EXPECT_NE(report.find("\n  cause: the file system holding /r is full (No space left on device; 12 KiB free of "
                        "2.0 MiB): free space there (a restart writes there again)\n"),
            std::string::npos)
      << report;
}

// A frozen task never exits by itself: its peer exits 3 first, naming it, and
// the launcher kills the frozen one. The report points at the named task.
TEST_F(JobSupervisorTest, ExitThreeFirstPointsAtTheTaskItNames) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 300ms, .peer_exit_wait = 300ms});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "echo 'error: task worker:1 failed at 2026-11-23T00:00:00Z: no heartbeat for 5000 ms'; "
                         "exit 3"),
       Shell("worker:1", "trap '' TERM; exec sleep 30")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 3);
  // Waited for (peer_exit_wait), then stopped: not left to run its 30 s.
  EXPECT_TRUE(Result(*outcome, "worker:1").stopped_by_supervisor);
  EXPECT_EQ(Result(*outcome, "worker:1").exit.signal, SIGKILL);
  EXPECT_NE(Slurp(dir_ / "console").find("[mirrored-launch] worker:0 stopped because another task failed (exit 3); "
                                         "waiting up to 0.3 s for the others to end by themselves"),
            std::string::npos);
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("first failure: task worker:0 ended with exit code 3"), std::string::npos) << report;
  EXPECT_NE(report.find("(exit 3: it stopped because another task failed; it names worker:1)"), std::string::npos)
      << report;
}

// worker:1 fails with a configuration error (exit 2) and reports it;
// worker:0 learns of it first and exits 3 before worker:1 has ended. The
// launcher leaves worker:1 to end by itself: the job's code is its 2 (never
// retried), not the 3 of the exit reaped first, and worker:1 is not
// SIGTERMed as a bystander.
TEST_F(JobSupervisorTest, AfterAnExitThreeTheTaskItNamesEndsWithItsOwnCode) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "exec 3>\"$DIR/fifo\"; echo 'error: task worker:1 failed: --lr -1 must be positive'; exit 3"),
       // It ends only once the launcher has reaped worker:0's exit 3 (its
       // console line), bounded at 10 s.
       Shell("worker:1", "read x < \"$DIR/fifo\"; i=0; until grep -q 'worker:0 stopped because another task' "
                         "\"$DIR/console\" || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done; "
                         "echo 'error: --lr -1 must be positive'; exit 2")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_NE(Slurp(dir_ / "console").find("worker:0 stopped because another task failed (exit 3)"), std::string::npos)
      << "the exit 3 was not reaped first: the scenario did not happen\n" << Slurp(dir_ / "console");
  EXPECT_EQ(outcome->exit_code, 2);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:1");
  EXPECT_FALSE(Result(*outcome, "worker:1").stopped_by_supervisor);
  EXPECT_EQ(Result(*outcome, "worker:1").exit.exit_code, 2);
}

// A frozen chief: its peer blames the coordination service it hosts.
TEST_F(JobSupervisorTest, ExitThreeFirstPointsAtAFrozenChief) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 300ms, .peer_exit_wait = 300ms});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "trap '' TERM; exec sleep 30"),
       Shell("worker:1", "echo 'error: the coordination service at 127.0.0.1:5 (hosted by task worker:0) has not "
                         "answered heartbeats for 5004 ms'; exit 3")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("(exit 3: it stopped because another task failed; it names worker:0)"), std::string::npos)
      << report;
}

// The others stop after the same step with 143, but the chief then fails to
// write that checkpoint (exit 1): the job failed, it was not a clean
// preemption, whichever exit came first.
TEST_F(JobSupervisorTest, AFailureAfterPreemptionExitsIsTheRootCause) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "trap '' TERM; read x < \"$DIR/fifo\"; echo 'No space left on device'; exit 1"),
       Shell("worker:1", "echo 'preempted: stopped after step 140'; echo > \"$DIR/fifo\"; exit 143")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 1);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:0");
  EXPECT_EQ(FormatFailureReport(*outcome).find("job preempted"), std::string::npos);
}

// A worker that exits 143 by itself was preempted (it checkpointed with the
// others): the report says so instead of calling it a failure, and does not
// claim the launcher stopped the others that exit 143 too.
TEST_F(JobSupervisorTest, PreemptionIsReportedAsSuch) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  // worker:1 exits only once worker:0's trap is in place.
  auto outcome = supervisor.Run(
      {Shell("worker:0", "trap 'exit 143' TERM; echo > \"$DIR/fifo\"; sleep 30 & wait"),
       Shell("worker:1", "read x < \"$DIR/fifo\"; echo 'preempted: stopped after step 40'; exit 143")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 143);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:1");
  std::string report = FormatFailureReport(*outcome);
  EXPECT_NE(report.find("==== job preempted ===="), std::string::npos) << report;
  EXPECT_EQ(report.find("job failed"), std::string::npos) << report;
  EXPECT_NE(report.find("first: task worker:1 ended with exit code 143 (preempted:"), std::string::npos)
      << report;
  EXPECT_NE(report.find("  worker:0: exit code 143 (preempted)\n"), std::string::npos) << report;
  EXPECT_NE(report.find("resumes from that checkpoint"), std::string::npos) << report;
}

TEST_F(JobSupervisorTest, TaskIgnoringSigtermIsKilledAfterTheGracePeriod) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 300ms});
  auto start = std::chrono::steady_clock::now();
  // worker:1 fails only once worker:0 ignores SIGTERM.
  auto outcome = supervisor.Run({Shell("worker:0", "trap '' TERM; echo > \"$DIR/fifo\"; sleep 30"),
                                 Shell("worker:1", "read x < \"$DIR/fifo\"; exit 1")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(Result(*outcome, "worker:0").exit.signal, SIGKILL);
  EXPECT_EQ(outcome->first_failure->name, "worker:1");
}

// worker:1 dies by SIGKILL; worker:0 notices (here: its fifo closes) and
// exits 3, possibly before worker:1 is reaped. The report names worker:1.
TEST_F(JobSupervisorTest, RootCauseIsPreferredOverPeerFailedExits) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s});
  auto outcome = supervisor.Run({Shell("worker:0", "read x < \"$DIR/fifo\"; exit 3"),
                                 Shell("worker:1", "exec 3>\"$DIR/fifo\"; kill -9 $$")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:1");
  EXPECT_EQ(outcome->first_failure->exit.signal, SIGKILL);
  EXPECT_EQ(outcome->exit_code, 128 + SIGKILL);
}

TEST_F(JobSupervisorTest, EarlySuccessIsNotAFailureAndEvaluatorFailureDoesNotStopTraining) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s});
  auto outcome = supervisor.Run({
      // Ends once the launcher has handled the evaluator's failure (its
      // console line), bounded at 10 s.
      Shell("worker:0", "read x < \"$DIR/fifo\"; i=0; until grep -q 'evaluator ended with exit code 5' "
                        "\"$DIR/console\" || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done; echo done"),
      Shell("worker:1", "exit 0"),
      Shell("evaluator", "echo go > \"$DIR/fifo\"; exit 5", /*training=*/false),
  });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const TaskResult& w0 = Result(*outcome, "worker:0");
  EXPECT_TRUE(w0.exit.success()) << w0.exit.ToString();
  EXPECT_FALSE(w0.stopped_by_supervisor);
  EXPECT_EQ(outcome->exit_code, 5);
  EXPECT_EQ(outcome->first_failure->name, "evaluator");
  // Said when it happens, not only at the end.
  EXPECT_NE(Slurp(dir_ / "console").find("evaluator ended with exit code 5 and is not started again (--max-restarts K "
                                         "would start it again); training goes on"),
            std::string::npos)
      << Slurp(dir_ / "console");
}

// An evaluator that fails by itself is started again, alone, while its
// budget lasts; training is not disturbed. Each attempt appends a line to
// $DIR/attempts; the first two fail.
TEST_F(JobSupervisorTest, AFailedEvaluatorIsStartedAgainAloneWithinItsBudget) {
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s, .evaluator_restarts = 2});
  const std::string evaluator =
      "echo \"attempt ended=${MIRRORED_TRAINING_ENDED:-no}\" >> \"$DIR/attempts\"; "
      "n=$(wc -l < \"$DIR/attempts\"); echo \"attempt $n\"; "
      "if [ \"$n\" -eq 2 ]; then echo go > \"$DIR/fifo\"; fi; [ \"$n\" -ge 3 ] || exit 7";
  auto outcome = supervisor.Run({
      // Training ends only once the second attempt runs.
      Shell("worker:0", "read x < \"$DIR/fifo\"; echo trained"),
      Shell("evaluator:0", evaluator, /*training=*/false),
  });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 0);
  EXPECT_FALSE(outcome->first_failure.has_value());
  EXPECT_TRUE(Result(*outcome, "worker:0").exit.success());
  const std::string attempts = Slurp(dir_ / "attempts");
  EXPECT_EQ(attempts.substr(0, 2 * std::string("attempt ended=no\n").size()), "attempt ended=no\nattempt ended=no\n")
      << attempts;
  const std::string console = Slurp(dir_ / "console");
  // After a pause that doubles: 1 s, then 2 s.
  EXPECT_NE(console.find("evaluator:0 ended with exit code 7; starting it again in 1 s (restart 1 of 2)"),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("starting it again in 2 s (restart 2 of 2)"), std::string::npos) << console;
  // Every attempt's output reaches the one log file.
  const std::string log = std::regex_replace(Slurp(dir_ / "evaluator:0.log"), std::regex("(started|started again) [0-9: -]+UTC"), "$1");
  EXPECT_EQ(log, "==== mirrored-launch: evaluator:0 started ====\nattempt 1\n"
                 "==== mirrored-launch: evaluator:0 started again ====\nattempt 2\n"
                 "==== mirrored-launch: evaluator:0 started again ====\nattempt 3\n");
}

// A stop requested while a failed evaluator waits out its pause: it is not
// started again, and the job ends with the stop.
TEST_F(JobSupervisorTest, AStopDuringAnEvaluatorsPauseCancelsItsRestart) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s, .evaluator_restarts = 3});
  std::thread stopper([&] {
    // Once the evaluator has failed (the scenario; its pause is 1 s).
    for (int i = 0; i < 500 && Slurp(dir_ / "console").find("starting it again in") == std::string::npos; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    supervisor.RequestStop(SIGINT);
  });
  auto outcome = supervisor.Run({Shell("worker:0", "exec sleep 30"),
                                 Shell("evaluator:0", "echo x >> \"$DIR/attempts\"; exit 7", /*training=*/false)});
  stopper.join();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 130);
  EXPECT_EQ(Slurp(dir_ / "attempts"), "x\n");
}

// After training ended well, a restarted evaluator is told so
// (MIRRORED_TRAINING_ENDED=1: the run directory's training-done record is
// this job's). Past its budget, its failure is the job's; exit 2 (bad usage)
// is never retried.
TEST_F(JobSupervisorTest, AnEvaluatorRestartedAfterTrainingEndedIsToldSoAndItsBudgetEnds) {
  // The evaluator fails only once worker:0 has exited (a zombie or reaped).
  // (Each loop gives up after 10 s rather than spin for ever.)
  const std::string wait_for_worker =
      "i=0; until [ -s \"$DIR/w.pid\" ] || [ $i -ge 500 ]; do sleep 0.02; i=$((i+1)); done; "
      "pid=$(cat \"$DIR/w.pid\"); i=0; "
      "while [ -e /proc/$pid ] && ! grep -q ') Z' /proc/$pid/stat && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; ";
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s, .evaluator_restarts = 1});
  auto outcome = supervisor.Run({
      Shell("worker:0", "echo $$ > \"$DIR/w.pid.tmp\"; mv \"$DIR/w.pid.tmp\" \"$DIR/w.pid\"; exit 0"),
      Shell("evaluator:0",
            wait_for_worker + "echo \"ended=${MIRRORED_TRAINING_ENDED:-no}\" >> \"$DIR/attempts\"; exit 7",
            /*training=*/false),
  });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(Slurp(dir_ / "attempts"), "ended=no\nended=1\n");
  EXPECT_EQ(outcome->exit_code, 7);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "evaluator:0");
  EXPECT_EQ(outcome->first_failure->restarts, 1);

  fs::remove(dir_ / "attempts");
  JobSupervisor strict(console_.get(), {.grace_period = 2s, .evaluator_restarts = 3});
  auto usage = strict.Run({Shell("worker:0", "exit 0"),
                           Shell("evaluator:0", "echo x >> \"$DIR/attempts\"; exit 2", /*training=*/false)});
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->exit_code, 2);
  EXPECT_EQ(Slurp(dir_ / "attempts"), "x\n");
}

// Training has ended well and the evaluator prints nothing (frozen, or
// blocked on a dead file server): it is stopped after the stall timeout and
// the job fails with its exit, instead of staying open for ever. An evaluator
// that keeps printing is left alone.
TEST_F(JobSupervisorTest, AnEvaluatorSilentAfterTrainingEndedIsStopped) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 300ms, .evaluator_stall_timeout = 500ms});
  auto start = std::chrono::steady_clock::now();
  auto outcome = supervisor.Run({Shell("worker:0", "exit 0"),
                                 Shell("evaluator:0", "echo following; exec sleep 30", /*training=*/false)});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(outcome->exit_code, 128 + SIGTERM);
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "evaluator:0");
  EXPECT_NE(Slurp(dir_ / "console").find("evaluator:0 printed nothing for 0.5 s after training ended"),
            std::string::npos)
      << Slurp(dir_ / "console");

  JobSupervisor patient(console_.get(), {.grace_period = 300ms, .evaluator_stall_timeout = 5s});
  auto busy = patient.Run({Shell("worker:0", "exit 0"),
                           Shell("evaluator:0", "for i in 1 2 3 4 5 6; do echo evaluated $i; sleep 0.2; done",
                                 /*training=*/false)});
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_EQ(busy->exit_code, 0);
}

TEST_F(JobSupervisorTest, StopRequestIsPassedOnAndGivesTheSignalsExitCode) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s});
  supervisor.RequestStop(SIGINT);  // delivered at the first poll
  auto outcome = supervisor.Run({Shell("worker:0", "exec sleep 30"),
                                 Shell("worker:1", "exec sleep 30")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 130);
  EXPECT_EQ(outcome->stop_signal, SIGINT);
  for (const auto& r : outcome->tasks) {
    EXPECT_EQ(r.exit.signal, SIGINT) << r.name;
    EXPECT_TRUE(r.stopped_by_supervisor) << r.name;
  }
  EXPECT_FALSE(outcome->first_failure.has_value());
}

// `timeout` sends SIGTERM to the launcher and then to its process group:
// two signals at once are one request (the tasks get SIGTERM and their grace
// period to checkpoint), not "SIGTERM again: kill at once".
TEST_F(JobSupervisorTest, TwoStopSignalsAtOnceAreOneRequest) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 5s});
  supervisor.RequestStop(SIGTERM, 4242);
  supervisor.RequestStop(SIGTERM, 4242);
  auto outcome = supervisor.Run({Shell("worker:0", "exec sleep 30"), Shell("worker:1", "exec sleep 30")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 143);
  for (const auto& r : outcome->tasks) EXPECT_EQ(r.exit.signal, SIGTERM) << r.name;
  EXPECT_EQ(Slurp(dir_ / "console").find("again: killing every task"), std::string::npos);
}

// A training task's fd 3 carries its signs of life. One that wrote and then
// fell silent, still running, is frozen: woken and stopped, and it is the
// job's failure (on a cluster host nothing else would end it). One that
// said "S" (its heartbeats ended) or never wrote is not judged.
TEST_F(JobSupervisorTest, ATaskThatFellSilentOnItsLivenessPipeIsStoppedAsFrozen) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s, .liveness_timeout = 300ms});
  auto outcome = supervisor.Run({Shell("worker:0", "[ \"$MIRRORED_LIVENESS_FD\" = 3 ] && printf h >&3; exec sleep 30"),
                                 Shell("worker:1", "printf hS >&3; sleep 1")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->name, "worker:0");
  EXPECT_EQ(outcome->first_failure->exit.signal, SIGTERM);
  EXPECT_FALSE(outcome->first_failure->stopped_by_supervisor);
  EXPECT_NE(Slurp(dir_ / "console").find("[mirrored-launch] worker:0 showed no sign of life for "), std::string::npos)
      << Slurp(dir_ / "console");
  EXPECT_EQ(Slurp(dir_ / "console").find("worker:1 showed no sign"), std::string::npos);

  JobSupervisor quiet(console_.get(), {.grace_period = 2s, .liveness_timeout = 300ms});
  auto fine = quiet.Run({Shell("worker:0", "sleep 1"), Shell("worker:1", "printf hS >&3; sleep 1")});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(fine->success());
}

// --hang-timeout: a task silent and idle that long is stopped as hung (exit
// 4); one that computes, or prints, is not.
TEST_F(JobSupervisorTest, ATaskSilentAndIdleForTheHangTimeoutIsStoppedAsHung) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s, .hang_timeout = 1500ms});
  auto outcome = supervisor.Run(
      {Shell("worker:0", "exec sleep 30"),
       Shell("worker:1", "end=$(($(date +%s) + 30)); while [ $(date +%s) -lt $end ]; do :; done"),
       Shell("worker:2", "while :; do echo tick; sleep 0.2; done"),
       Shell("evaluator:0", "exec sleep 30", /*training=*/false)});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const std::string console = Slurp(dir_ / "console");
  ASSERT_TRUE(outcome->first_failure.has_value()) << console;
  EXPECT_EQ(outcome->first_failure->name, "worker:0") << console;
  ASSERT_TRUE(outcome->first_failure->hung.has_value());
  EXPECT_EQ(outcome->exit_code, kExitTimeout);
  EXPECT_NE(console.find("[mirrored-launch] worker:0 is hung: it printed nothing and used under 2% of a core for "
                         "1.5 s (--hang-timeout): stopping the job"),
            std::string::npos)
      << console;
  for (const char* busy : {"worker:1 is hung", "worker:2 is hung", "evaluator:0 is hung"}) {
    EXPECT_EQ(console.find(busy), std::string::npos) << console;
  }
  EXPECT_TRUE(Result(*outcome, "worker:1").stopped_by_supervisor);
  EXPECT_NE(FormatFailureReport(*outcome).find("(stopped as hung: it printed nothing"), std::string::npos);
}

// A task's error file (torch's @record) is cleared before it starts and
// quoted in the report when it fails.
TEST_F(JobSupervisorTest, AFailedTasksErrorFileIsQuotedAndAStaleOneIsCleared) {
  TaskLaunch failing = Shell("worker:0",
                             "[ -e \"$DIR/worker0.json\" ] && exit 5; sleep 0.2; "
                             "printf '{\"message\": {\"message\": \"RuntimeError: boom\\\\nsecond\", "
                             "\"extraInfo\": {\"timestamp\": \"1\"}}}' > \"$DIR/worker0.json\"; exit 1");
  failing.error_file = (dir_ / "worker0.json").string();
  std::ofstream(failing.error_file) << "{\"message\": \"stale: from the last run\"}";
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s});
  auto outcome = supervisor.Run({failing, Shell("worker:1", "sleep 30")});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->first_failure.has_value());
  EXPECT_EQ(outcome->first_failure->exit.exit_code, 1) << Slurp(dir_ / "console");
  ASSERT_TRUE(outcome->first_failure->error_message.has_value());
  EXPECT_EQ(*outcome->first_failure->error_message, "RuntimeError: boom\nsecond");
  EXPECT_NE(FormatFailureReport(*outcome).find("  its error (" + failing.error_file +
                                               "):\n  | RuntimeError: boom\n  | second\n"),
            std::string::npos)
      << FormatFailureReport(*outcome);
}

TEST_F(JobSupervisorTest, TaskThatCannotStartIsAnErrorNamingIt) {
  JobSupervisor supervisor(console_.get(), {.grace_period = 2s});
  TaskLaunch missing = Shell("worker:1", "");
  missing.argv = {(dir_ / "no-such-worker").string()};
  auto outcome = supervisor.Run({Shell("worker:0", "exec sleep 30"), missing});
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(outcome.status().message(), "task worker:1: cannot start \"" +
                                            (dir_ / "no-such-worker").string() +
                                            "\": No such file or directory");
}

}  // namespace
}  // namespace mirrored
