// Runs the built `mirrored-launch` with a user's program after `--`
// (user_program.py, a stand-in for a TensorFlow or torch script): what each
// task gets, ports it binds itself, restarts, exit codes, hangs, the
// evaluator's own command and the error file in the report.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "launcher/process/child_process.h"
#include "tests/util/process_test_util.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kLauncher = std::string(MIRRORED_BIN_DIR) + "/mirrored-launch";
const std::string kProgram = std::string(MIRRORED_SOURCE_DIR) + "/tests/launcher/user_program.py";

class LaunchUserProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-user-program-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ChildProcess Start(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kLauncher};
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
    EXPECT_TRUE(child.ok()) << child.status();
    return std::move(child).value();
  }
  // The launcher's merged output until it exits; its exit code.
  static int Finish(ChildProcess& child, std::string* output, std::chrono::seconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = read(child.output_fd(), buf, sizeof(buf));
      if (n > 0) {
        output->append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) break;
      std::this_thread::sleep_for(5ms);
    }
    auto exit = child.WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  deadline - std::chrono::steady_clock::now()) + 1ms);
    if (!exit) {
      ADD_FAILURE() << "launcher still running after the deadline; output:\n" << *output;
      child.SignalGroup(SIGKILL);
      return -1;
    }
    return exit->ShellCode();
  }
  int Run(const std::vector<std::string>& args, std::string* output) {
    ChildProcess child = Start(args);
    return Finish(child, output);
  }
  std::string RunDir(const std::string& name = "run") const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(LaunchUserProgramTest, EachTaskGetsTfConfigTorchsVariablesAndItsArgumentsAsGiven) {
  std::string out;
  ASSERT_EQ(Run({"local", "--workers", "2", "--evaluator", "--run-dir", RunDir(), "--", "python3", kProgram,
                 "--tag", "x y"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("running /usr/bin/python3, worker:0 at 127.0.0.1:"), std::string::npos) << out;
  std::smatch master;
  ASSERT_TRUE(std::regex_search(out, master, std::regex(R"(worker:0 at 127\.0\.0\.1:([0-9]+))"))) << out;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "worker:" + std::to_string(i);
    EXPECT_NE(out.find("[" + name + "] " + name + " tag=x y RANK=" + std::to_string(i) + " WORLD_SIZE=2 LOCAL_RANK=" +
                       std::to_string(i) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + master[1].str() +
                       " TORCHELASTIC_RESTART_COUNT=0 MIRRORED_RUN_DIR=" + RunDir() + " MIRRORED_JOB_TOKEN=None\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("[" + name + "] " + name + " done"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("[evaluator:0] evaluator:0 tag=x y RANK=None"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir_ / "run/logs/worker:1.log"));
  EXPECT_FALSE(fs::exists(dir_ / "run/tls")) << "a user's program gets no coordination-service CA";
}

// Each program binds the port its TF_CONFIG gives it (as TensorFlow's
// server does), while the launcher holds it against other jobs: no job's
// bind fails, none takes another's port.
TEST_F(LaunchUserProgramTest, TwentyConcurrentJobsBindTheirOwnPortsWithoutAnError) {
  std::vector<ChildProcess> launchers;
  for (int i = 0; i < 20; ++i) {
    launchers.push_back(
        Start({"local", "--workers", "2", "--run-dir", RunDir("run" + std::to_string(i)), "--", "python3", kProgram}));
  }
  for (int i = 0; i < 20; ++i) {
    std::string out;
    EXPECT_EQ(Finish(launchers[i], &out, 120s), 0) << "job " << i << ":\n" << out;
    EXPECT_EQ(out.find("Address already in use"), std::string::npos) << out;
  }
}

TEST_F(LaunchUserProgramTest, AFailedProgramRestartsTheJobAndItsErrorFileIsQuoted) {
  std::string out;
  ASSERT_EQ(Run({"local", "--workers", "2", "--max-restarts", "1", "--run-dir", RunDir(), "--", "python3", kProgram,
                 "--mode", "fail-first"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("first failure: task worker:1 ended with exit code 1"), std::string::npos) << out;
  EXPECT_NE(out.find("  its error (" + RunDir() + "/logs/worker:1.error.json):\n"
                     "[mirrored-launch]   | RuntimeError: the loss is NaN at step 7\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("restarting the job from the program's own checkpoints (it resumes itself: "
                     "TORCHELASTIC_RESTART_COUNT=1, MIRRORED_GENERATION=1)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[worker:1] worker:1 tag= RANK=1 WORLD_SIZE=2 LOCAL_RANK=1"), std::string::npos) << out;
  EXPECT_NE(out.find("TORCHELASTIC_RESTART_COUNT=1"), std::string::npos) << out;
  EXPECT_NE(out.find("job succeeded after 1 restart"), std::string::npos) << out;
}

TEST_F(LaunchUserProgramTest, ExitTwoIsNotRestartedAndAProgramThatCannotRunIsExitTwo) {
  std::string out;
  EXPECT_EQ(Run({"local", "--workers", "2", "--max-restarts", "2", "--run-dir", RunDir(), "--", "python3", kProgram,
                 "--mode", "usage"},
                &out),
            2)
      << out;
  EXPECT_NE(out.find("not restarting: exit code 2 means bad usage"), std::string::npos) << out;
  EXPECT_EQ(out.find("restarting the job from"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Run({"local", "--run-dir", RunDir("b"), "--", "no-such-program", "train.py"}, &out), 2) << out;
  EXPECT_NE(out.find("mirrored-launch: error: the program after `--`: program \"no-such-program\" is not found in "
                     "PATH (\"/usr/bin:/bin\")"),
            std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(Run({"local", "--run-dir", RunDir("c"), "--cpu-replicas", "2", "--", "python3", kProgram}, &out), 2)
      << out;
  EXPECT_NE(out.find("--cpu-replicas is mirrored-worker's"), std::string::npos) << out;
}

TEST_F(LaunchUserProgramTest, ATaskSilentAndIdlePastTheHangTimeoutEndsTheJobWithFour) {
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Run({"local", "--workers", "2", "--hang-timeout", "2", "--grace-period", "1", "--run-dir", RunDir(), "--",
                 "python3", kProgram, "--mode", "hang"},
                &out),
            4)
      << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_NE(out.find(" is hung: it printed nothing and used under 2% of a core for 2 s (--hang-timeout): stopping "
                     "the job"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("(stopped as hung: "), std::string::npos) << out;
}

TEST_F(LaunchUserProgramTest, TheEvaluatorRunsItsOwnCommandWithItsTfConfig) {
  std::string out;
  ASSERT_EQ(Run({"local", "--workers", "1", "--evaluator", "--evaluator-command",
                 "python3 " + kProgram + " --tag 'the evaluator'", "--run-dir", RunDir(), "--", "python3", kProgram},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("[evaluator:0] evaluator:0 tag=the evaluator RANK=None"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker:0] worker:0 tag= RANK=0 WORLD_SIZE=1"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Run({"local", "--evaluator-command", "python3 x.py", "--run-dir", RunDir("b"), "--", "python3", kProgram},
                &out),
            2)
      << out;
  EXPECT_NE(out.find("--evaluator-command needs --evaluator"), std::string::npos) << out;
}

// `cluster`: the ranks come from the cluster (chief first), the master is
// the chief's address, and no token is asked for (the coordination service
// is not the program's).
TEST_F(LaunchUserProgramTest, ClusterTasksGetTheirRanksFromTheCluster) {
  const std::string tf_config =
      R"({"cluster":{"chief":["h1.example:2222"],"worker":["h2.example:2222","h2.example:2223"]},)"
      R"("task":{"type":"worker","index":1}})";
  std::string out;
  ASSERT_EQ(Run({"cluster", "--tf-config", tf_config, "--dry-run", "--run-dir", RunDir(), "--", "python3", kProgram},
                &out),
            0)
      << out;
  for (const char* expected : {"env: RANK=2\n", "env: WORLD_SIZE=3\n", "env: LOCAL_RANK=1\n", "env: LOCAL_WORLD_SIZE=2\n",
                               "env: GROUP_RANK=1\n", "env: MASTER_ADDR=h1.example\n", "env: MASTER_PORT=2222\n",
                               "command: /usr/bin/python3 "}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
  EXPECT_EQ(out.find("--run-dir"), std::string::npos) << out;
  EXPECT_EQ(out.find("MIRRORED_JOB_TOKEN"), std::string::npos) << out;
}

}  // namespace
}  // namespace mirrored
