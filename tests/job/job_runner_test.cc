#include "launcher/job/job_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <csignal>
#include <thread>

namespace mirrored {
namespace {

using namespace std::chrono_literals;

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/mirrored-runner-XXXXXX";
    fd_ = mkstemp(path);
    path_ = path;
    console_ = std::make_unique<ConsoleWriter>(fd_);
    supervisor_ = std::make_unique<JobSupervisor>(console_.get(), SupervisorOptions{.grace_period = 2s});
  }
  void TearDown() override {
    close(fd_);
    unlink(path_.c_str());
  }
  std::string Console() {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Two workers; worker:1 runs `script_for(generation)`.
  JobRunner::TaskFactory Factory(std::function<std::string(int)> script_for) {
    return [script_for](int generation) {
      std::vector<TaskLaunch> tasks;
      for (int i = 0; i < 2; ++i) {
        TaskLaunch t;
        t.name = "worker:" + std::to_string(i);
        t.argv = {"/bin/sh", "-c", i == 1 ? script_for(generation) : "exit 0"};
        t.env = {"PATH=/usr/bin:/bin"};
        tasks.push_back(t);
      }
      return tasks;
    };
  }

  int fd_ = -1;
  std::string path_;
  std::unique_ptr<ConsoleWriter> console_;
  std::unique_ptr<JobSupervisor> supervisor_;
};

TEST_F(JobRunnerTest, RestartsAFailedJobWithANewGeneration) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 2});
  int code = runner.Run(Factory([](int gen) { return gen == 0 ? "exit 1" : "exit 0"; }));
  EXPECT_EQ(code, 0);
  EXPECT_EQ(runner.generations_run(), 2);
  std::string out = Console();
  EXPECT_NE(out.find("first failure: task worker:1 ended with exit code 1"), std::string::npos) << out;
  EXPECT_NE(out.find("restarting the job from the latest checkpoint: generation 1, restart 1 of 2"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("job succeeded after 1 restart"), std::string::npos) << out;
}

// Where the chief's checkpoints are seen, the restart line names the one
// the job resumes from, or says it starts again from step 0.
TEST_F(JobRunnerTest, TheRestartLineNamesTheCheckpointItResumesFrom) {
  std::vector<std::string> points = {"", "ckpt-40"};
  JobRunner runner(supervisor_.get(), console_.get(),
                   {.max_restarts = 2, .restart_backoff = 1ms, .resume_point = [&] {
                      std::string p = points.front();
                      points.erase(points.begin());
                      return p;
                    }});
  EXPECT_EQ(runner.Run(Factory([](int gen) { return gen < 2 ? "exit 1" : "exit 0"; })), 0);
  std::string out = Console();
  EXPECT_NE(out.find("restarting the job from the start (no checkpoint yet): generation 1, restart 1 of 2\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("restarting the job from ckpt-40: generation 2, restart 2 of 2"), std::string::npos) << out;
}

// A job that fails again and again is restarted at once the first time,
// then after a pause that doubles; a stop signal during a pause ends the
// launcher with 128 + sig instead of restarting.
TEST_F(JobRunnerTest, RestartsAfterTheFirstWaitAPauseThatDoublesAndAStopEndsIt) {
  JobRunner runner(supervisor_.get(), console_.get(),
                   {.max_restarts = 3, .restart_backoff = 50ms, .max_restart_backoff = 80ms});
  EXPECT_EQ(runner.Run(Factory([](int) { return "exit 1"; })), 1);
  EXPECT_EQ(runner.generations_run(), 4);
  std::string out = Console();
  EXPECT_NE(out.find("generation 1, restart 1 of 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("generation 2, restart 2 of 3 (in 0.05 s: it failed again)"), std::string::npos) << out;
  EXPECT_NE(out.find("generation 3, restart 3 of 3 (in 0.08 s: it failed again)"), std::string::npos) << out;

  // The first restart's failure starts a 20 s pause, which a stop request
  // (sent once the console says so) ends.
  JobRunner stopped(supervisor_.get(), console_.get(), {.max_restarts = 3, .restart_backoff = 20s});
  std::thread stopper([&] {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (Console().find("(in 20 s: it failed again)") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);  // polling the console file for the line
    }
    supervisor_->RequestStop(SIGTERM);
  });
  const int code = stopped.Run(Factory([](int) { return "exit 1"; }));
  stopper.join();
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_EQ(stopped.generations_run(), 2);
  EXPECT_NE(Console().find("SIGTERM (15) while waiting to restart: not restarting"), std::string::npos) << Console();
}

TEST_F(JobRunnerTest, GivesUpAfterMaxRestartsWithTheFailedTasksCode) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 1});
  EXPECT_EQ(runner.Run(Factory([](int) { return "exit 4"; })), 4);
  EXPECT_EQ(runner.generations_run(), 2);
  EXPECT_NE(Console().find("giving up after 1 restart (--max-restarts 1)"), std::string::npos);
}

TEST_F(JobRunnerTest, ConfigurationErrorsAreNotRetried) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 3});
  EXPECT_EQ(runner.Run(Factory([](int) { return "exit 2"; })), 2);
  EXPECT_EQ(runner.generations_run(), 1);
  EXPECT_NE(Console().find("not restarting: exit code 2"), std::string::npos);
}

// Cluster mode: this host's task exited 3 because a task on another host
// failed with a configuration error. That one is not started again, so a
// restart here would wait for it until the registration timeout: not
// restarted. A peer's other failures still are.
TEST_F(JobRunnerTest, APeersConfigurationErrorIsNotRetriedHere) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 3});
  EXPECT_EQ(runner.Run(Factory([](int) {
              return "echo 'mirrored-worker: worker:1: error: task worker:7 failed at 2026-11-23T08:28:45.836Z: "
                     "exited with error: NOT_FOUND: /nonexistent/train-images-idx3-ubyte.gz: no such file'; exit 3";
            })),
            3);
  EXPECT_EQ(runner.generations_run(), 1);
  std::string out = Console();
  EXPECT_NE(out.find("(exit 3: it stopped because another task failed; it names worker:7, whose error is one of "
                     "usage or configuration)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("not restarting: worker:7 failed with bad usage or configuration (exit code 2 there)"),
            std::string::npos)
      << out;

  // A peer stopped by a Ctrl-C on its host is not started again there:
  // the job stops here too.
  JobRunner interrupted(supervisor_.get(), console_.get(), {.max_restarts = 3});
  EXPECT_EQ(interrupted.Run(Factory([](int) {
              return "echo 'mirrored-worker: worker:1: error: task worker:2 failed at 2026-11-25T08:28:45.836Z: "
                     "exited with error: CANCELLED: interrupted on its host (SIGINT: a Ctrl-C)'; exit 3";
            })),
            3);
  EXPECT_EQ(interrupted.generations_run(), 1);
  out = Console();
  EXPECT_NE(out.find("it names worker:2, interrupted on its host (SIGINT: a Ctrl-C))"), std::string::npos) << out;
  EXPECT_NE(out.find("not restarting: worker:2 was interrupted on its host (SIGINT: a Ctrl-C), which stops the whole "
                     "job"),
            std::string::npos)
      << out;

  JobRunner again(supervisor_.get(), console_.get(), {.max_restarts = 1});
  EXPECT_EQ(again.Run(Factory([](int) {
              return "echo 'mirrored-worker: worker:1: error: task worker:7 failed at 2026-11-23T08:28:45.836Z: "
                     "exited with error: INTERNAL: out of memory'; exit 3";
            })),
            3);
  EXPECT_EQ(again.generations_run(), 2);
}

TEST_F(JobRunnerTest, StartErrorsGiveExitCodeTwo) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 3});
  int code = runner.Run([](int) {
    TaskLaunch t;
    t.name = "worker:0";
    t.argv = {"/nonexistent/worker"};
    return std::vector<TaskLaunch>{t};
  });
  EXPECT_EQ(code, 2);
  EXPECT_NE(Console().find("[mirrored-launch] error: task worker:0: cannot start"), std::string::npos);
}

// Training succeeded and only the evaluator failed (after the supervisor's
// own restarts of it): a new generation would train nothing.
TEST_F(JobRunnerTest, AnEvaluatorFailureAloneDoesNotRestartTheJob) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 2});
  int code = runner.Run([](int) {
    TaskLaunch w{.name = "worker:0", .argv = {"/bin/sh", "-c", "exit 0"}, .env = {"PATH=/usr/bin:/bin"}};
    TaskLaunch e{.name = "evaluator:0", .is_training = false, .argv = {"/bin/sh", "-c", "exit 6"},
                 .env = {"PATH=/usr/bin:/bin"}};
    return std::vector<TaskLaunch>{w, e};
  });
  EXPECT_EQ(code, 6);
  EXPECT_EQ(runner.generations_run(), 1);
  EXPECT_NE(Console().find("not restarting the job: training succeeded and only evaluator:0 failed"),
            std::string::npos)
      << Console();
}

// An evaluator that exits 2 is never started again (JobSupervisor): the
// report does not suggest --max-restarts, which would not either.
TEST_F(JobRunnerTest, AnEvaluatorsExitTwoIsNotSaidToBeRetriedByMaxRestarts) {
  JobRunner runner(supervisor_.get(), console_.get(), {.max_restarts = 0});
  int code = runner.Run([](int) {
    TaskLaunch w{.name = "worker:0", .argv = {"/bin/sh", "-c", "exit 0"}, .env = {"PATH=/usr/bin:/bin"}};
    TaskLaunch e{.name = "evaluator:0", .is_training = false, .argv = {"/bin/sh", "-c", "exit 2"},
                 .env = {"PATH=/usr/bin:/bin"}};
    return std::vector<TaskLaunch>{w, e};
  });
  EXPECT_EQ(code, 2);
  const std::string out = Console();
  EXPECT_EQ(out.find("--max-restarts"), std::string::npos) << out;
  EXPECT_NE(out.find("not restarting the job: training succeeded and only evaluator:0 failed with exit code 2 (bad "
                     "usage or configuration, which a restart cannot fix); start an evaluator alone"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace mirrored
