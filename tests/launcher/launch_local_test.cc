// Runs the built `mirrored-launch local` with a stand-in worker
// (fake_worker.sh) and checks supervision: prefixes and logs, failure
// reports, exit codes, restarts, signals, orphans and concurrent jobs.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "common/cpu_cores.h"
#include "launcher/process/child_process.h"
#include "tests/util/process_test_util.h"

namespace mirrored {
namespace {

using testing_util::ProcessAlive;
using testing_util::ReadWholeFile;
using testing_util::WaitUntil;

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kLauncher = std::string(MIRRORED_BIN_DIR) + "/mirrored-launch";
const std::string kFakeWorker = std::string(MIRRORED_SOURCE_DIR) + "/tests/launcher/fake_worker.sh";
// mirrored-worker's default --data (Debian's dataset-fashion-mnist).
const std::string kDataDir = "/usr/share/datasets/fashion-mnist";

class LaunchLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-launch-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts the launcher; its output goes to the returned child's pipe.
  ChildProcess Start(std::vector<std::string> args, const fs::path& run_dir) {
    std::vector<std::string> argv = {kLauncher, "local", "--run-dir", run_dir.string(), "--worker-binary",
                                     kFakeWorker, "--grace-period", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
    EXPECT_TRUE(child.ok()) << child.status();
    return std::move(child).value();
  }
  // Reads the launcher's merged output until it exits; returns its exit code.
  int Finish(ChildProcess& child, std::string* output, std::chrono::milliseconds timeout = 20s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      ssize_t n = read(child.output_fd(), buf, sizeof(buf));
      if (n > 0) {
        output->append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) break;
      std::this_thread::sleep_for(5ms);
    }
    auto exit = child.WaitFor(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()) + 1ms);
    if (!exit) {
      ADD_FAILURE() << "launcher still running after the deadline; output:\n" << *output;
      return -1;
    }
    return exit->ShellCode();
  }
  int RunToEnd(std::vector<std::string> args, std::string* output, const std::string& run = "run") {
    ChildProcess child = Start(std::move(args), dir_ / run);
    return Finish(child, output);
  }
  pid_t TaskPid(const std::string& task, const std::string& run = "run") {
    pid_t pid = 0;
    WaitUntil([&] { return fs::exists(dir_ / run / ("pid." + task)); }, 10s);
    std::ifstream(dir_ / run / ("pid." + task)) >> pid;
    EXPECT_GT(pid, 0) << "task " << task << " never wrote its pid";
    return pid;
  }

  fs::path dir_;
};

TEST_F(LaunchLocalTest, SuccessPrefixesEachTaskAndWritesItsLog) {
  std::string out;
  EXPECT_EQ(RunToEnd({"--workers", "3", "--evaluator", "--", "--mode", "ok"}, &out), 0) << out;
  for (const char* t : {"worker:0", "worker:1", "worker:2", "evaluator:0"}) {
    std::string task(t);
    EXPECT_NE(out.find("[" + task + "] task " + task + " generation 0 token 32 chars\n"), std::string::npos) << out;
    const std::string log = ReadWholeFile(dir_ / "run/logs" / (task + ".log"));
    EXPECT_EQ(log.rfind("==== mirrored-launch: " + task + " started ", 0), 0u) << log;
    EXPECT_EQ(log.substr(log.find('\n') + 1), "task " + task + " generation 0 token 32 chars\n");
  }
}

TEST_F(LaunchLocalTest, KilledWorkerIsReportedAndEveryProcessIsGone) {
  ChildProcess launcher = Start({"--workers", "3", "--", "--mode", "kill-task1"}, dir_ / "run");
  pid_t w0 = TaskPid("worker:0"), w2 = TaskPid("worker:2");
  std::string out;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Finish(launcher, &out), 128 + SIGKILL) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(out.find("first failure: task worker:1 ended with signal SIGKILL (9)"), std::string::npos) << out;
  EXPECT_NE(out.find("  | step 42: about to die"), std::string::npos) << out;
  EXPECT_NE(out.find("worker:0: signal SIGTERM (15) (stopped by the launcher)"), std::string::npos) << out;
  EXPECT_FALSE(ProcessAlive(w0));
  EXPECT_FALSE(ProcessAlive(w2));
}

TEST_F(LaunchLocalTest, MaxRestartsRestartsTheWholeJob) {
  std::string out;
  EXPECT_EQ(RunToEnd({"--workers", "2", "--max-restarts", "1", "--", "--mode", "fail-gen0-task1"}, &out), 0) << out;
  EXPECT_NE(out.find("first failure: task worker:1 ended with exit code 1"), std::string::npos) << out;
  // The fake worker writes no checkpoint: the job starts again from step 0.
  EXPECT_NE(out.find("restarting the job from the start (no checkpoint yet): generation 1, restart 1 of 1"),
            std::string::npos) << out;
  EXPECT_NE(out.find("[worker:1] task worker:1 generation 1"), std::string::npos) << out;
  EXPECT_NE(out.find("job succeeded after 1 restart"), std::string::npos) << out;
  // The launcher's own lines are kept beside the tasks' logs, for a job run
  // in the background; the tasks' lines are not repeated there.
  const std::string log = ReadWholeFile(dir_ / "run/logs/launcher.log");
  EXPECT_NE(log.find("==== mirrored-launch: launcher (pid "), std::string::npos) << log;
  EXPECT_NE(log.find("[mirrored-launch] first failure: task worker:1 ended with exit code 1"), std::string::npos)
      << log;
  EXPECT_NE(log.find("[mirrored-launch] job succeeded after 1 restart"), std::string::npos) << log;
  EXPECT_EQ(log.find("[worker:1]"), std::string::npos) << log;
}

TEST_F(LaunchLocalTest, SigintStopsTheJobWith130) {
  ChildProcess launcher = Start({"--workers", "2", "--", "--mode", "hang"}, dir_ / "run");
  pid_t w0 = TaskPid("worker:0"), w1 = TaskPid("worker:1");
  kill(launcher.pid(), SIGINT);
  std::string out;
  EXPECT_EQ(Finish(launcher, &out), 130) << out;
  EXPECT_NE(out.find("job stopped by SIGINT"), std::string::npos) << out;
  EXPECT_FALSE(ProcessAlive(w0));
  EXPECT_FALSE(ProcessAlive(w1));
}

// Ctrl-C twice: the second one does not wait out the grace period.
TEST_F(LaunchLocalTest, SecondSigintKillsEveryTaskAtOnce) {
  std::vector<std::string> argv = {kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--worker-binary",
                                   kFakeWorker, "--grace-period", "60", "--workers", "2", "--", "--mode", "deaf"};
  auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t w0 = TaskPid("worker:0"), w1 = TaskPid("worker:1");
  kill(child->pid(), SIGINT);
  std::string out;
  ASSERT_TRUE(WaitUntil([&] {
    char buf[4096];
    ssize_t n = read(child->output_fd(), buf, sizeof(buf));
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    return out.find("a second signal: at once") != std::string::npos;
  }, 10s)) << out;
  const auto start = std::chrono::steady_clock::now();
  // From another process: a second signal from the first one's sender
  // within a second counts as the same request (`timeout` sends two).
  ASSERT_EQ(system(("kill -INT " + std::to_string(child->pid())).c_str()), 0);
  EXPECT_EQ(Finish(*child, &out, 20s), 130) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "waited out the 60 s grace period";
  EXPECT_NE(out.find("SIGINT (2) again: killing every task"), std::string::npos) << out;
  EXPECT_FALSE(ProcessAlive(w0));
  EXPECT_FALSE(ProcessAlive(w1));
}

TEST_F(LaunchLocalTest, SigkillOfTheLauncherLeavesNoOrphans) {
  ChildProcess launcher = Start({"--workers", "2", "--evaluator", "--", "--mode", "hang"}, dir_ / "run");
  pid_t w0 = TaskPid("worker:0"), w1 = TaskPid("worker:1"), ev = TaskPid("evaluator:0");
  ASSERT_TRUE(ProcessAlive(w0) && ProcessAlive(w1) && ProcessAlive(ev));
  kill(launcher.pid(), SIGKILL);
  EXPECT_TRUE(launcher.WaitFor(5s).has_value());
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(w0) && !ProcessAlive(w1) && !ProcessAlive(ev); }, 2s))
      << "tasks outlived a SIGKILLed launcher";
}

TEST_F(LaunchLocalTest, TwentyConcurrentJobsAllRun) {
  std::vector<ChildProcess> launchers;
  for (int i = 0; i < 20; ++i) launchers.push_back(Start({"--workers", "2", "--", "--mode", "ok"}, dir_ / ("run" + std::to_string(i))));
  std::set<std::string> tokens;
  for (int i = 0; i < 20; ++i) {
    std::string out;
    EXPECT_EQ(Finish(launchers[i], &out, 60s), 0) << "job " << i << ":\n" << out;
    for (const char* task : {"worker:0", "worker:1"}) {
      const fs::path log = dir_ / ("run" + std::to_string(i)) / "logs" / (std::string(task) + ".log");
      EXPECT_NE(ReadWholeFile(log).find(std::string("task ") + task + " generation 0 token 32 chars"),
                std::string::npos) << log;
    }
    // Each job's own token: its tasks' TF_CONFIG and environment are its own.
    const std::string token = ReadWholeFile(dir_ / ("run" + std::to_string(i)) / "token.worker:0");
    EXPECT_EQ(token, ReadWholeFile(dir_ / ("run" + std::to_string(i)) / "token.worker:1")) << "job " << i;
    tokens.insert(token);
  }
  EXPECT_EQ(tokens.size(), 20u) << "jobs started together got the same token";
}

TEST_F(LaunchLocalTest, MissingOrNonExecutableWorkerIsExitTwo) {
  std::vector<std::string> argv = {kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--worker-binary",
                                   (dir_ / "nope").string()};
  auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(child.ok());
  std::string out;
  EXPECT_EQ(Finish(*child, &out), 2);
  EXPECT_NE(out.find("mirrored-launch: error: worker binary " + (dir_ / "nope").string() + " does not exist"),
            std::string::npos) << out;
  std::ofstream(dir_ / "plain") << "#!/bin/sh\n";
  argv.back() = (dir_ / "plain").string();
  child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
  out.clear();
  EXPECT_EQ(Finish(*child, &out), 2);
  EXPECT_NE(out.find("is not executable"), std::string::npos) << out;
}

TEST_F(LaunchLocalTest, DryRunPrintsEveryTaskAndStartsNothing) {
  std::string out;
  EXPECT_EQ(RunToEnd({"--workers", "2", "--evaluator", "--cpu-replicas", "2", "--dry-run", "--", "--mode", "ok"}, &out), 0);
  EXPECT_NE(out.find("worker:1\n  command: " + kFakeWorker + " --mode ok --run-dir"), std::string::npos) << out;
  EXPECT_NE(out.find("--cpu-replicas 2"), std::string::npos) << out;
  EXPECT_NE(out.find("evaluator:0 (evaluator)"), std::string::npos) << out;
  EXPECT_NE(out.find("env: TF_CONFIG={\"cluster\":{\"worker\":[\"127.0.0.1:"), std::string::npos) << out;
  // A stand-in binary is not run to check the flags (it might start training).
  EXPECT_NE(out.find("# worker flags: not checked: " + kFakeWorker + " is not mirrored-worker"), std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir_ / "run/logs"));
}

// The visible GPUs split evenly: a split that leaves every worker without
// a GPU, or some GPUs idle, is said; an even one is not.
TEST_F(LaunchLocalTest, GpusLeftIdleByTheEvenSplitAreWarnedAbout) {
  auto dry_run = [&](const std::string& visible, const std::string& workers, std::string* out) {
    auto child = ChildProcess::Spawn({kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--dry-run",
                                      "--worker-binary", kFakeWorker, "--workers", workers},
                                     {"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=" + visible});
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? Finish(*child, out) : -1;
  };
  std::string out;
  EXPECT_EQ(dry_run("0", "2", &out), 0) << out;
  EXPECT_NE(out.find("mirrored-launch: warning: 1 GPU(s) for 2 workers: split evenly, each worker gets none and "
                     "trains on CPU replicas"),
            std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(dry_run("0,1,2", "2", &out), 0) << out;
  EXPECT_NE(out.find("mirrored-launch: warning: 3 GPUs for 2 workers: 1 each, 1 left idle"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(dry_run("0,1", "2", &out), 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
}

// --evaluator-gpus: the evaluator's own GPUs, the next after the workers',
// shown by --dry-run as the workers' are; refused, exit 2, when too few are
// visible or no evaluator runs. The GPUs are CUDA_VISIBLE_DEVICES's.
TEST_F(LaunchLocalTest, EvaluatorGpusAreShownAndCheckedBeforeAnythingStarts) {
  auto launch = [&](const std::string& visible, std::vector<std::string> args, std::string* out) {
    std::vector<std::string> argv = {kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--dry-run",
                                     "--worker-binary", kFakeWorker};
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin", "CUDA_VISIBLE_DEVICES=" + visible});
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? Finish(*child, out) : -1;
  };
  std::string out;
  EXPECT_EQ(launch("0,1", {"--gpus-per-worker", "1", "--evaluator", "--evaluator-gpus", "1"}, &out), 0) << out;
  const size_t evaluator = out.find("\nevaluator:0 (evaluator)\n");
  ASSERT_NE(evaluator, std::string::npos) << out;
  EXPECT_NE(out.find("  env: CUDA_VISIBLE_DEVICES=0\n"), std::string::npos) << out;
  EXPECT_LT(out.find("  env: CUDA_VISIBLE_DEVICES=0\n"), evaluator) << out;
  EXPECT_NE(out.find("  env: CUDA_VISIBLE_DEVICES=1\n", evaluator), std::string::npos) << out;
  // Without --gpus-per-worker the workers split what the evaluator leaves.
  out.clear();
  EXPECT_EQ(launch("0,1,2", {"--workers", "2", "--evaluator", "--evaluator-gpus", "1"}, &out), 0) << out;
  EXPECT_NE(out.find("  env: CUDA_VISIBLE_DEVICES=2\n", out.find("\nevaluator:0 (evaluator)\n")), std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(launch("", {"--evaluator", "--evaluator-gpus", "1"}, &out), 2) << out;
  EXPECT_NE(out.find("mirrored-launch: error: --evaluator-gpus 1 needs 1 GPU, 0 visible"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(launch("0", {"--gpus-per-worker", "1", "--evaluator", "--evaluator-gpus", "1"}, &out), 2) << out;
  EXPECT_NE(out.find("--evaluator-gpus 1 needs 1 GPU besides the 1 the workers take (--gpus-per-worker 1 x "
                     "--workers 1): 2 in all, 1 visible"),
            std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(launch("0,1", {"--evaluator-gpus", "1"}, &out), 2) << out;
  EXPECT_NE(out.find("--evaluator-gpus 1 needs --evaluator"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(launch("0,1", {"--evaluator", "--evaluator-gpus", "-1"}, &out), 2) << out;
  EXPECT_NE(out.find("--evaluator-gpus -1 must not be negative"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(launch("0,1", {"--evaluator", "--evaluator-gpus", "1.5"}, &out), 2) << out;
  EXPECT_NE(out.find("--evaluator-gpus: \"1.5\" is not an integer"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "run" / "logs")) << "a refused job started something";
}

// A launcher flag given twice takes its last value, as with argparse (a
// script's defaults, then the user's own).
TEST_F(LaunchLocalTest, ALauncherFlagGivenTwiceTakesItsLastValue) {
  std::string out;
  EXPECT_EQ(RunToEnd({"--workers", "1", "--evaluator", "--workers", "2", "--dry-run"}, &out), 0) << out;
  EXPECT_NE(out.find("# mirrored-launch local --dry-run: 2 worker(s) + evaluator"), std::string::npos) << out;
  EXPECT_NE(out.find("\nworker:1\n"), std::string::npos) << out;
}

// With mirrored-worker (the one beside the launcher), --dry-run checks the
// workers' own flags and the data files they name: a bad one is exit 2
// naming it, before any job.
TEST_F(LaunchLocalTest, DryRunChecksTheWorkersFlagsWithMirroredWorker) {
  for (const auto& [worker_args, expected] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--model", "cnn", "--epochs", "2"}, "# worker flags: checked by "},
           {{"--model", "cnn", "--epochz", "2"},
            "the workers' flags (after `--`): mirrored-worker: error: --epochz is not a flag of mirrored-worker"},
           {{"--lr", "-1"}, "the workers' flags (after `--`): mirrored-worker: error: --lr -1 must be a positive"},
           {{"--seed", "-1"},
            "the workers' flags (after `--`): mirrored-worker: error: --seed: -1 is out of range: 0 to "
            "9223372036854775807"},
           // The data files too: the job would exit 2 for them at once.
           {{"--model", "mlp", "--data", "/nonexistent"},
            "the workers' flags (after `--`): mirrored-worker: error: /nonexistent/train-images-idx3-ubyte.gz: no "
            "such file"}}) {
    if (expected.starts_with("#") && !fs::exists(kDataDir + "/train-images-idx3-ubyte.gz")) continue;
    std::vector<std::string> argv = {kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--dry-run", "--"};
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
    ASSERT_TRUE(child.ok()) << child.status();
    std::string out;
    EXPECT_EQ(Finish(*child, &out), expected.starts_with("#") ? 0 : 2) << out;
    EXPECT_NE(out.find(expected), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir_ / "run/logs")) << out;
  }
  // The evaluator's data files are checked as well: with --no-validate the
  // training tasks read no test split, the evaluator does.
  if (fs::exists(kDataDir + "/train-images-idx3-ubyte.gz")) {
    const fs::path train_only = dir_ / "train-only";
    fs::create_directories(train_only);
    for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
      fs::create_symlink(kDataDir + "/" + f, train_only / f);
    }
    for (const bool evaluator : {false, true}) {
      std::vector<std::string> argv = {kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--dry-run"};
      if (evaluator) argv.push_back("--evaluator");
      argv.insert(argv.end(), {"--", "--no-validate", "--data", train_only.string()});
      auto child = ChildProcess::Spawn(argv, {"PATH=/usr/bin:/bin"});
      ASSERT_TRUE(child.ok()) << child.status();
      std::string out;
      EXPECT_EQ(Finish(*child, &out), evaluator ? 2 : 0) << out;
      EXPECT_EQ(out.find("mirrored-worker: error: " + (train_only / "t10k-images-idx3-ubyte.gz").string() +
                         ": no such file") != std::string::npos,
                evaluator)
          << out;
    }
  }
  // A script under the worker's name is not run either.
  fs::create_directories(dir_ / "wrapper");
  const fs::path script = dir_ / "wrapper" / "mirrored-worker";
  std::ofstream(script) << "#!/bin/sh\ntouch \"$0.ran\"\n";
  fs::permissions(script, fs::perms::owner_all);
  auto child = ChildProcess::Spawn({kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--dry-run",
                                    "--worker-binary", script.string(), "--", "--epochs", "1"},
                                   {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out;
  EXPECT_EQ(Finish(*child, &out), 0) << out;
  EXPECT_NE(out.find("# worker flags: not checked: " + script.string() + " is not mirrored-worker"), std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(script.string() + ".ran")) << out;
}

// A worker whose --check-flags crashes would crash in the job too: the dry
// run fails instead of passing it as "not checked". The crashing program is
// bash under the worker's name (an ELF file), told to SIGSEGV itself.
TEST_F(LaunchLocalTest, DryRunFailsWhenTheFlagCheckCrashes) {
  fs::create_directories(dir_ / "crashing");
  const fs::path worker = dir_ / "crashing" / "mirrored-worker";
  fs::create_symlink("/bin/bash", worker);
  auto child = ChildProcess::Spawn({kLauncher, "local", "--run-dir", (dir_ / "run").string(), "--dry-run",
                                    "--worker-binary", worker.string(), "--", "-c", "kill -SEGV $$"},
                                   {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out;
  EXPECT_EQ(Finish(*child, &out), 1) << out;
  EXPECT_NE(out.find("mirrored-launch: error: the workers' flags (after `--`): " + worker.string() +
                     " --check-flags crashed (signal SIGSEGV (11)), and the job's tasks would too"),
            std::string::npos)
      << out;
}

// Without --run-dir every launch gets a new directory, even launches in the
// same second: a job never resumes another one's checkpoints by chance.
TEST_F(LaunchLocalTest, JobsStartedTogetherWithoutRunDirGetDistinctOnes) {
  std::vector<ChildProcess> launchers;
  for (int i = 0; i < 3; ++i) {
    auto child = ChildProcess::Spawn({"/bin/sh", "-c", "cd '" + dir_.string() + "' && exec '" + kLauncher +
                                                           "' local --worker-binary '" + kFakeWorker + "' -- --mode ok"},
                                     {"PATH=/usr/bin:/bin"});
    ASSERT_TRUE(child.ok()) << child.status();
    launchers.push_back(std::move(child).value());
  }
  for (auto& l : launchers) {
    std::string out;
    EXPECT_EQ(Finish(l, &out), 0) << out;
  }
  std::set<std::string> dirs;
  for (const auto& e : fs::directory_iterator(dir_ / "runs")) {
    dirs.insert(e.path().filename());
    EXPECT_TRUE(fs::exists(e.path() / "logs" / "worker:0.log")) << e.path();
  }
  EXPECT_EQ(dirs.size(), 3u);
}

// cluster mode without --run-dir: one directory for the whole launch, so a
// restarted generation resumes from the first one's checkpoints.
TEST_F(LaunchLocalTest, ClusterRestartKeepsTheDefaultRunDir) {
  auto child = ChildProcess::Spawn(
      {"/bin/sh", "-c",
       "cd '" + dir_.string() + "' && exec '" + kLauncher + "' cluster --max-restarts 1 --grace-period 2 " +
           "--worker-binary '" + kFakeWorker + "' -- --mode fail-gen0"},
      {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t",
       R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"worker","index":0}})"});
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out;
  EXPECT_EQ(Finish(*child, &out), 0) << out;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(dir_ / "runs")) dirs.push_back(e.path());
  ASSERT_EQ(dirs.size(), 1u) << out;
  // Every host says which task it runs and where the job meets.
  EXPECT_NE(out.find(std::string("mirrored-launch: cluster task worker:0 (chief) of a job of 1 training task, from TF_CONFIG "
                     "environment variable, coordination service at 127.0.0.1:1 (hosted here), run directory ") +
                     "runs/" + dirs[0].filename().string() + "\n"),
            std::string::npos)
      << out;
  const std::string log = ReadWholeFile(dirs[0] / "logs" / "worker:0.log");
  EXPECT_NE(log.find("task worker:0 generation 0"), std::string::npos) << log;
  EXPECT_NE(log.find("task worker:0 generation 1"), std::string::npos) << log;
  const std::string launcher_log = ReadWholeFile(dirs[0] / "logs" / "launcher-worker:0.log");
  // The chief's host sees the checkpoints (none: the fake worker writes none).
  EXPECT_NE(launcher_log.find("[mirrored-launch] restarting the job from the start (no checkpoint yet)"),
            std::string::npos)
      << launcher_log;
}

// cluster without a cluster would train alone, maybe into a shared run
// directory beside the job it was meant to join: exit 2, before any task.
TEST_F(LaunchLocalTest, ClusterWithoutAClusterIsExitTwo) {
  for (const std::string& tf_config : {std::string(), std::string(R"({"task":{"type":"worker","index":0}})")}) {
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t"};
    if (!tf_config.empty()) env.push_back("TF_CONFIG=" + tf_config);
    auto child = ChildProcess::Spawn({kLauncher, "cluster", "--run-dir", (dir_ / "alone").string(), "--worker-binary",
                                      kFakeWorker},
                                     env);
    ASSERT_TRUE(child.ok()) << child.status();
    std::string out;
    EXPECT_EQ(Finish(*child, &out), 2) << out;
    EXPECT_NE(out.find(tf_config.empty() ? "no cluster: TF_CONFIG is not set and no --tf-config, --from-slurm or "
                                           "--from-k8s-indexed-job was given"
                                         : "no cluster: TF_CONFIG environment variable has no \"cluster\""),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("use `mirrored-launch local`"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir_ / "alone" / "logs")) << out;
  }
}

// srun passes a Ctrl-C on to every task at once: under --from-slurm the
// tasks are told so (none reports being interrupted alone, as under
// `local`); with TF_CONFIG a value inherited from the environment is not
// passed on (the launcher decides).
TEST_F(LaunchLocalTest, ClusterFromSlurmTellsTheTasksTheWholeJobIsSignalled) {
  auto dry_run = [&](std::vector<std::string> env, std::vector<std::string> flags) {
    env.insert(env.end(), {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", "MIRRORED_WHOLE_JOB_SIGNALLED=1"});
    std::vector<std::string> argv = {kLauncher, "cluster", "--run-dir", (dir_ / "run").string(), "--dry-run",
                                     "--worker-binary", kFakeWorker};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto child = ChildProcess::Spawn(argv, env);
    EXPECT_TRUE(child.ok()) << child.status();
    std::string out;
    EXPECT_EQ(Finish(*child, &out), 0) << out;
    return out;
  };
  std::string out = dry_run({"SLURM_PROCID=1", "SLURM_LOCALID=1", "SLURM_STEP_NUM_TASKS=2",
                             "SLURM_STEP_NODELIST=127.0.0.1", "SLURM_STEP_TASKS_PER_NODE=2"},
                            {"--from-slurm"});
  EXPECT_NE(out.find("  env: MIRRORED_WHOLE_JOB_SIGNALLED=1\n"), std::string::npos) << out;
  out = dry_run({R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1","h2:2"]},"task":{"type":"worker","index":0}})"}, {});
  EXPECT_EQ(out.find("MIRRORED_WHOLE_JOB_SIGNALLED"), std::string::npos) << out;
}

// An evaluator in its own new default run directory would wait for
// checkpoints that never come there: exit 2, naming the flag.
TEST_F(LaunchLocalTest, ClusterEvaluatorWithoutRunDirIsExitTwo) {
  const fs::path cwd = dir_ / "cwd";
  fs::create_directories(cwd);
  auto child = ChildProcess::Spawn(
      {"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" cluster --worker-binary \"$2\"", cwd.string(), kLauncher,
       kFakeWorker},
      {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t",
       R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1"]},"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out;
  EXPECT_EQ(Finish(*child, &out), 2) << out;
  EXPECT_NE(out.find("evaluator:0 needs --run-dir: the chief's run directory"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(cwd / "runs")) << out;
}

// Every task computes with its share of the cores (cores / --workers),
// unless the user's OMP_NUM_THREADS says otherwise; a value that is no
// thread count is replaced by the share, with a warning.
TEST_F(LaunchLocalTest, EveryTaskGetsItsShareOfTheCores) {
  const int cores = UsableCpuCores();  // the launcher inherits this process's mask and cgroup
  auto dry_run = [&](int workers, const std::string& omp) {
    std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
    if (!omp.empty()) env.push_back("OMP_NUM_THREADS=" + omp);
    auto child = ChildProcess::Spawn({kLauncher, "local", "--workers", std::to_string(workers), "--evaluator",
                                      "--dry-run", "--worker-binary", kFakeWorker},
                                     env);
    EXPECT_TRUE(child.ok()) << child.status();
    std::string out;
    EXPECT_EQ(Finish(*child, &out), 0) << out;
    return out;
  };
  auto count = [](const std::string& out, const std::string& line) {
    size_t n = 0;
    for (size_t at = out.find(line); at != std::string::npos; at = out.find(line, at + 1)) ++n;
    return n;
  };
  std::string out = dry_run(1, "");
  EXPECT_EQ(count(out, "  env: OMP_NUM_THREADS=" + std::to_string(cores) + "\n"), 2u) << out;  // worker + evaluator
  out = dry_run(2, "");
  EXPECT_EQ(count(out, "  env: OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / 2)) + "\n"), 3u) << out;
  out = dry_run(2, "3");
  EXPECT_EQ(count(out, "  env: OMP_NUM_THREADS=3\n"), 3u) << out;
  out = dry_run(2, "4,2");
  EXPECT_EQ(count(out, "  env: OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / 2)) + "\n"), 3u) << out;
  EXPECT_NE(out.find("warning: OMP_NUM_THREADS \"4,2\" is not a thread count"), std::string::npos) << out;
}

// `cluster`: the training tasks the cluster lists at this host share its
// cores (as `local`'s workers do) unless the user set OMP_NUM_THREADS or
// something already narrowed the CPUs (a mask or quota below the machine's).
TEST_F(LaunchLocalTest, ClusterTasksListedAtOneHostShareItsCores) {
  const std::string cluster = R"({"cluster":{"chief":["127.0.0.1:1"],"worker":["localhost:2","h3:3"]},)";
  auto dry_run = [&](const std::string& task, const std::optional<std::string>& omp) {
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", "TF_CONFIG=" + cluster + task};
    if (omp) env.push_back("OMP_NUM_THREADS=" + *omp);
    auto child = ChildProcess::Spawn(
        {kLauncher, "cluster", "--run-dir", (dir_ / "run").string(), "--dry-run", "--worker-binary", kFakeWorker},
        env);
    EXPECT_TRUE(child.ok()) << child.status();
    std::string out;
    EXPECT_EQ(Finish(*child, &out), 0) << out;
    return out;
  };
  const int cores = UsableCpuCores();
  const bool unbound = cores == OnlineCpuCores();  // else nothing is set
  std::string out = dry_run(R"("task":{"type":"worker","index":0}})", std::nullopt);
  const std::string share = std::to_string(std::max(1, cores / 2));
  EXPECT_EQ(out.find("  env: OMP_NUM_THREADS=" + share + "\n") != std::string::npos, unbound) << out;
  if (unbound) {
    EXPECT_NE(out.find("mirrored-launch: 2 training tasks of the cluster are listed at localhost: worker:0 computes "
                       "with OMP_NUM_THREADS=" + share + " (the " + std::to_string(cores) + " core(s) here / 2;"),
              std::string::npos)
        << out;
  }
  out = dry_run(R"("task":{"type":"worker","index":1}})", std::nullopt);  // alone at h3
  EXPECT_EQ(out.find("OMP_NUM_THREADS"), std::string::npos) << out;
  out = dry_run(R"("task":{"type":"chief","index":0}})", std::to_string(OnlineCpuCores()));
  EXPECT_NE(out.find("  env: OMP_NUM_THREADS=" + std::to_string(OnlineCpuCores()) + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("warning: OMP_NUM_THREADS " + std::to_string(OnlineCpuCores()) +
                     " x 2 training tasks listed at this host is more than the"),
            std::string::npos)
      << out;
  // A value that is no thread count is not the user's choice (the worker
  // would compute with every core): the share replaces it, as with `local`,
  // with a warning unless it is empty (`export OMP_NUM_THREADS=`).
  for (const std::string omp : {"4,2", ""}) {
    out = dry_run(R"("task":{"type":"worker","index":0}})", omp);
    if (!unbound) continue;
    EXPECT_NE(out.find("  env: OMP_NUM_THREADS=" + share + "\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("  env: OMP_NUM_THREADS=" + omp + "\n"), std::string::npos) << out;  // not passed on too
    EXPECT_NE(out.find("worker:0 computes with OMP_NUM_THREADS=" + share), std::string::npos) << out;
    EXPECT_EQ(out.find("warning: OMP_NUM_THREADS \"" + omp +
                       "\" is not a thread count: the task gets its share of the cores instead\n") != std::string::npos,
              !omp.empty())
        << out;
  }
}

// More CPU replicas than twice the cores take turns on them (each computes
// with at least one thread): warned about; the demo's 2 x 2 on 2 cores not.
TEST_F(LaunchLocalTest, ReplicasFarBeyondTheCoresAreWarnedAbout) {
  const int cores = UsableCpuCores();
  auto dry_run = [&](int workers, int replicas) {
    auto child = ChildProcess::Spawn({kLauncher, "local", "--workers", std::to_string(workers), "--cpu-replicas",
                                      std::to_string(replicas), "--gpus-per-worker", "0", "--dry-run",
                                      "--worker-binary", kFakeWorker},
                                     {"PATH=/usr/bin:/bin"});
    EXPECT_TRUE(child.ok()) << child.status();
    std::string out;
    EXPECT_EQ(Finish(*child, &out), 0) << out;
    return out;
  };
  std::string out = dry_run(cores + 1, 2);
  EXPECT_NE(out.find("warning: " + std::to_string(cores + 1) + " worker(s) x 2 CPU replica(s) is " +
                     std::to_string(2 * (cores + 1)) + " replicas"),
            std::string::npos)
      << out;
  out = dry_run(std::max(1, cores), 2);
  EXPECT_EQ(out.find("take turns on the cores"), std::string::npos) << out;
}

TEST_F(LaunchLocalTest, BadFlagsAreExitTwo) {
  std::string out;
  EXPECT_EQ(RunToEnd({"--workers", "0"}, &out), 2);
  EXPECT_NE(out.find("--workers 0 is out of range"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunToEnd({"--cpu-replicas", "0"}, &out), 2);
  EXPECT_NE(out.find("--cpu-replicas 0 must be at least 1"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunToEnd({"--gpus-per-worker", "-1", "--dry-run"}, &out), 2);  // was taken for "not given"
  EXPECT_NE(out.find("--gpus-per-worker -1 must not be negative"), std::string::npos) << out;
  auto nan_grace = ChildProcess::Spawn({kLauncher, "local", "--grace-period", "nan"}, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(nan_grace.ok());
  out.clear();
  EXPECT_EQ(Finish(*nan_grace, &out), 2);
  EXPECT_NE(out.find("--grace-period nan must be 0 to 86400 seconds"), std::string::npos) << out;
  // What the launcher sets for every task does not go after `--`.
  out.clear();
  EXPECT_EQ(RunToEnd({"--", "--run-dir", "elsewhere"}, &out), 2);
  EXPECT_NE(out.find("--run-dir after `--`: the launcher gives every task its run directory"), std::string::npos)
      << out;
  EXPECT_NE(out.find("(mirrored-launch local --run-dir DIR -- ...)"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunToEnd({"--cpu-replicas", "2", "--", "--cpu-replicas=1"}, &out), 2);
  EXPECT_NE(out.find("--cpu-replicas is given both to mirrored-launch and after `--`"), std::string::npos) << out;
  // A worker flag without `--` before it: the hint says where it goes.
  out.clear();
  EXPECT_EQ(RunToEnd({"--model", "mlp", "--", "--epochs", "1"}, &out), 2);
  EXPECT_NE(out.find("--model is not a flag of `local`"), std::string::npos) << out;
  EXPECT_NE(out.find("the workers' own flags go after `--`"), std::string::npos) << out;
  EXPECT_EQ(out.find("not expected"), std::string::npos) << out;  // not CLI11's list of everything after it
  // torchrun's flags: what they are called here.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--nproc_per_node=2"},
                                              std::vector<std::string>{"--nproc-per-node", "2"},
                                              std::vector<std::string>{"--nproc", "2"}}) {
    out.clear();
    EXPECT_EQ(RunToEnd(args, &out), 2);
    EXPECT_NE(out.find(args[0].substr(0, args[0].find('=')) +
                       " is not a flag of `local`: torchrun's --nproc_per_node is --workers here (`mirrored-launch "
                       "local --help` lists them"),
              std::string::npos)
        << out;
  }
  out.clear();
  EXPECT_EQ(RunToEnd({"--nnodes", "2", "--node_rank", "0"}, &out), 2);
  EXPECT_NE(out.find("--nnodes, --node_rank are not flags of `local`: a job over several hosts is `mirrored-launch "
                     "cluster` on each of them"),
            std::string::npos)
      << out;
  // A value that is no integer: one line, named as the others are.
  out.clear();
  EXPECT_EQ(RunToEnd({"--workers", "abc"}, &out), 2);
  EXPECT_NE(out.find("mirrored-launch local: error: --workers: \"abc\" is not an integer (mirrored-launch local --help)"),
            std::string::npos)
      << out;
  // Decimal, as argparse reads it (CLI11 alone: octal, 8 workers).
  out.clear();
  EXPECT_EQ(RunToEnd({"--workers", "010", "--dry-run"}, &out), 0) << out;
  EXPECT_NE(out.find("--dry-run: 10 worker(s)"), std::string::npos) << out;
  EXPECT_EQ(out.find("Run with --help"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "run" / "logs")) << "a refused job started something";
}

}  // namespace
}  // namespace mirrored
