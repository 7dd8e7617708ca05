// Supervision of real training: `mirrored-launch local` running the built
// mirrored-worker (mlp on Fashion-MNIST, 2 workers), with a worker SIGKILLed
// mid-training (restarted from the latest checkpoint to the same weights as
// an uninterrupted run, or reported and cleaned up without restarts), and
// SIGINT to the launcher. The stand-in worker tests are launch_local_test.cc.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "launcher/job/port_reservation.h"
#include "launcher/process/child_process.h"
#include "tests/util/process_test_util.h"
#include "tests/util/worker_process.h"

namespace mirrored {
namespace {

using testing_util::ProcessAlive;
using testing_util::ReadWholeFile;
using testing_util::WaitUntil;

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kLauncher = std::string(MIRRORED_BIN_DIR) + "/mirrored-launch";
constexpr int kSteps = 60;

// NUL-separated /proc files (cmdline, environ) as their entries.
std::vector<std::string> ProcEntries(const fs::path& p) {
  std::vector<std::string> out;
  std::string all = ReadWholeFile(p), item;
  std::istringstream in(all);
  while (std::getline(in, item, '\0')) out.push_back(item);
  return out;
}

// The live mirrored-worker processes of the job whose --run-dir is
// `run_dir` (unique per test), by their TF_CONFIG task index.
std::map<int, pid_t> WorkerPids(const fs::path& run_dir) {
  std::map<int, pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto argv = ProcEntries(entry.path() / "cmdline");
    if (argv.empty() || fs::path(argv[0]).filename() != "mirrored-worker") continue;
    bool ours = false;
    for (size_t i = 0; i + 1 < argv.size(); ++i) ours |= argv[i] == "--run-dir" && argv[i + 1] == run_dir.string();
    if (!ours) continue;
    for (const auto& var : ProcEntries(entry.path() / "environ")) {
      if (var.rfind("TF_CONFIG=", 0) != 0) continue;
      auto tf = nlohmann::json::parse(var.substr(10), nullptr, /*allow_exceptions=*/false);
      if (tf.is_discarded() || !tf.contains("task")) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (tf["task"].value("type", "") == "worker" && ProcessAlive(pid)) pids[tf["task"].value("index", -1)] = pid;
    }
  }
  return pids;
}

std::string Fingerprint(const std::string& output) {
  std::smatch m;
  static const std::regex kFp("worker:0\\] done: .*weights fingerprint ([0-9a-f]{6})");
  return std::regex_search(output, m, kFp) ? m[1].str() : "";
}

// A launcher whose merged output is read as it comes (WorkerProcess), with
// the test's environment and a failure when it outlives a deadline.
class Launch {
 public:
  explicit Launch(const std::vector<std::string>& argv, std::vector<std::string> env = {}) {
    env.insert(env.end(), {"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1"});
    auto process = testing_util::WorkerProcess::Start(argv, env);
    EXPECT_TRUE(process.ok()) << process.status();
    if (process.ok()) process_ = std::move(process).value();
  }
  ChildProcess& child() { return process_->child(); }
  const std::string& output() const { return process_ ? process_->output() : kNone; }

  // Reads until `text` appears in the output; false once it ended or at the deadline.
  bool ReadUntil(const std::string& text, std::chrono::milliseconds timeout) {
    return process_ && process_->WaitForOutput(text, timeout);
  }
  // Reaps the launcher; nullopt (and a test failure) if it has not ended by the deadline.
  std::optional<ProcessExit> Finish(std::chrono::milliseconds timeout) {
    if (!process_) return std::nullopt;
    auto exit = process_->WaitExit(timeout);
    if (!exit) ADD_FAILURE() << "launcher still running after the deadline; output:\n" << output();
    return exit;
  }

 private:
  static inline const std::string kNone;
  std::unique_ptr<testing_util::WorkerProcess> process_;
};

class LaunchRealWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-realworker-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 2 workers x 1 CPU replica training mlp; `launcher_flags` go before `--`.
  std::vector<std::string> Job(const fs::path& run, std::vector<std::string> launcher_flags,
                               int max_steps = kSteps) {
    std::vector<std::string> argv = {kLauncher, "local", "--workers", "2", "--cpu-replicas", "1",
                                     "--run-dir", run.string(), "--grace-period", "3"};
    argv.insert(argv.end(), launcher_flags.begin(), launcher_flags.end());
    const std::string steps = std::to_string(max_steps);
    for (const std::string& a : {std::string("--"), std::string("--model"), std::string("mlp"),
                                 std::string("--max-steps"), steps, std::string("--epochs"), std::string("1000"),
                                 std::string("--checkpoint-every"),
                                 std::string("10"), std::string("--log-every"), std::string("1"),
                                 std::string("--no-validate")})
      argv.push_back(a);
    return argv;
  }
  // The weights fingerprint of the job run to the end without interruption
  // (empty, with a test failure, if it did not succeed).
  std::string UninterruptedFingerprint() {
    Launch straight(Job(dir_ / "straight", {}));
    auto exit = straight.Finish(60s);
    EXPECT_TRUE(exit && exit->success()) << straight.output();
    const std::string fingerprint = Fingerprint(straight.output());
    EXPECT_FALSE(fingerprint.empty()) << straight.output();
    return exit && exit->success() ? fingerprint : "";
  }
  // Stops a running job with SIGINT (exit 130 expected) and returns its
  // worker:0.log.
  static std::string InterruptAndReadChiefLog(Launch& job, const fs::path& run) {
    EXPECT_EQ(kill(job.child().pid(), SIGINT), 0);
    auto stopped = job.Finish(10s);
    EXPECT_TRUE(stopped && stopped->ShellCode() == 130) << job.output();
    std::ifstream in(run / "logs" / "worker:0.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // Waits until both workers of `run` are up; their pids by index.
  std::map<int, pid_t> BothWorkers(const fs::path& run) {
    std::map<int, pid_t> pids;
    WaitUntil([&] { return (pids = WorkerPids(run)).size() == 2; }, 20s);
    EXPECT_EQ(pids.size(), 2u) << "found " << pids.size() << " mirrored-worker process(es) with --run-dir " << run;
    return pids;
  }

  fs::path dir_;
};

TEST_F(LaunchRealWorkerTest, KilledWorkerIsRestartedFromTheCheckpointToTheSameWeights) {
  const std::string want = UninterruptedFingerprint();
  ASSERT_FALSE(want.empty());

  const fs::path run = dir_ / "restarted";
  Launch job(Job(run, {"--max-restarts", "1"}));
  auto pids = BothWorkers(run);
  ASSERT_EQ(pids.count(1), 1u);
  // After the step-10 checkpoint, well before the end.
  ASSERT_TRUE(job.ReadUntil("[worker:0] step 15/" + std::to_string(kSteps), 30s)) << job.output();
  ASSERT_EQ(job.output().find("[worker:0] done:"), std::string::npos) << "the job ended before the kill";
  ASSERT_EQ(kill(pids[1], SIGKILL), 0) << "worker:1 (pid " << pids[1] << ") was already gone";

  auto exit = job.Finish(60s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->success()) << exit->ToString() << "\n" << job.output();
  const std::string& out = job.output();
  EXPECT_NE(out.find("first failure: task worker:1 ended with signal SIGKILL (9)"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("\\[worker:0\\] .*resuming from \\S*ckpt-(\\d+)"))) << out;
  EXPECT_GE(std::stoi(m[1].str()), 10) << out;
  // The launcher named, before the restart, the checkpoint the chief resumed from.
  EXPECT_NE(out.find("restarting the job from ckpt-" + m[1].str() + ": generation 1, restart 1 of 1"),
            std::string::npos) << out;
  EXPECT_NE(out.find("job succeeded after 1 restart"), std::string::npos) << out;
  EXPECT_EQ(Fingerprint(out), want) << out;
  std::printf("resumed from ckpt-%s; fingerprint %s (uninterrupted %s)\n", m[1].str().c_str(),
              Fingerprint(out).c_str(), want.c_str());
}

TEST_F(LaunchRealWorkerTest, KilledWorkerWithoutRestartsIsReportedAndEveryWorkerIsGone) {
  const fs::path run = dir_ / "run";
  Launch job(Job(run, {}));
  auto pids = BothWorkers(run);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(job.ReadUntil("[worker:0] step 15/" + std::to_string(kSteps), 30s)) << job.output();
  ASSERT_EQ(kill(pids[1], SIGKILL), 0) << "worker:1 (pid " << pids[1] << ") was already gone";
  const auto killed_at = Clock::now();

  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(pids[0]) && !ProcessAlive(pids[1]); }, 5s))
      << "a worker outlived the killed one by 5 s";
  auto exit = job.Finish(10s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_LT(Clock::now() - killed_at, 10s);
  const std::string& out = job.output();
  // The launcher exits with the code of the task that failed first: the
  // shell's 128 + 9 for worker:1's SIGKILL, not worker:0's 3 (peer failed).
  EXPECT_EQ(exit->ShellCode(), 128 + SIGKILL) << out;
  EXPECT_NE(out.find("first failure: task worker:1 ended with signal SIGKILL (9)"), std::string::npos) << out;
  EXPECT_NE(out.find("last "), std::string::npos) << out;
  EXPECT_EQ(out.find("restarting the job"), std::string::npos) << out;
  EXPECT_EQ(out.find("[worker:0] done:"), std::string::npos) << out;
  EXPECT_TRUE(WorkerPids(run).empty());
}

// A second job on a run directory that a job on this machine trains in is
// refused by its launcher before anything starts (exit 2, naming the first
// job's chief), so none of its lines land in the first job's task logs; the
// first job goes on to its end.
TEST_F(LaunchRealWorkerTest, SecondJobOnABusyRunDirIsRefusedBeforeItWritesAnyLog) {
  const fs::path run = dir_ / "run";
  Launch first(Job(run, {}, /*max_steps=*/100000));  // still training when the second starts
  ASSERT_TRUE(first.ReadUntil("[worker:0] step 5/", 30s)) << first.output();
  Launch second(Job(run, {"--evaluator"}));
  auto refused = second.Finish(30s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->ShellCode(), 2) << second.output();
  EXPECT_NE(second.output().find("mirrored-launch: error: --run-dir " + run.string() +
                                 " is in use by another job (its chief: pid "),
            std::string::npos)
      << second.output();
  EXPECT_EQ(second.output().find("[worker:"), std::string::npos) << "a task was started:\n" << second.output();
  const std::string log = InterruptAndReadChiefLog(first, run);
  EXPECT_NE(log.find("step 5/"), std::string::npos) << log;
  EXPECT_EQ(log.find("in use by another job"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(run / "logs" / "evaluator:0.log"));
}

// Two jobs started on one run directory in the same instant, before either
// chief could lock it: the launchers' own lock lets one run, and the other
// is refused before it starts a task (one dated header per task log).
TEST_F(LaunchRealWorkerTest, TwoJobsStartedTogetherOnOneRunDirRunOnce) {
  const fs::path run = dir_ / "run";
  std::vector<std::unique_ptr<Launch>> jobs;
  jobs.push_back(std::make_unique<Launch>(Job(run, {}, /*max_steps=*/100000)));  // both still training
  jobs.push_back(std::make_unique<Launch>(Job(run, {}, /*max_steps=*/100000)));  // when the other looks
  int refused = -1;
  for (int round = 0; round < 300 && refused < 0; ++round) {
    for (int i = 0; i < 2 && refused < 0; ++i)
      // (Its launcher's lock, or on a slow machine already its chief's.)
      if (jobs[i]->ReadUntil("is in use by another job (its ", 50ms)) refused = i;
  }
  ASSERT_GE(refused, 0) << jobs[0]->output() << "\n----\n" << jobs[1]->output();
  Launch& loser = *jobs[refused];
  Launch& winner = *jobs[1 - refused];
  auto lost = loser.Finish(10s);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->ShellCode(), 2) << loser.output();
  EXPECT_EQ(loser.output().find("[worker:"), std::string::npos) << loser.output();
  ASSERT_TRUE(winner.ReadUntil("[worker:0] step 5/", 30s)) << winner.output();
  const std::string log = InterruptAndReadChiefLog(winner, run);
  size_t headers = 0;
  for (size_t at = log.find("==== mirrored-launch:"); at != std::string::npos; at = log.find("==== mirrored-launch:", at + 1))
    ++headers;
  EXPECT_EQ(headers, 1u) << log;
}

TEST_F(LaunchRealWorkerTest, SigintStopsRealTrainingWith130WithinTheGracePeriod) {
  const fs::path run = dir_ / "run";
  // Long enough that it is still training when interrupted.
  // A grace period far longer than the bound below: ending within the
  // bound means the workers stopped on the SIGINT, not on the SIGKILL.
  Launch job(Job(run, {"--grace-period", "60"}, /*max_steps=*/100000));
  auto pids = BothWorkers(run);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(job.ReadUntil("[worker:0] step 5/", 30s)) << job.output();
  ASSERT_EQ(kill(job.child().pid(), SIGINT), 0);
  const auto interrupted_at = Clock::now();

  auto exit = job.Finish(30s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_LT(Clock::now() - interrupted_at, 20s);
  EXPECT_EQ(exit->ShellCode(), 130) << job.output();
  EXPECT_NE(job.output().find("job stopped by SIGINT"), std::string::npos) << job.output();
  EXPECT_FALSE(ProcessAlive(pids[0]));
  EXPECT_FALSE(ProcessAlive(pids[1]));
  EXPECT_TRUE(WorkerPids(run).empty());
}

// The multi-worker fault tolerance of the tutorials with `cluster` mode: one
// independent launcher per worker (as on separate hosts: separate run
// directories, only worker:0's holds checkpoints), each with --max-restarts
// 1. worker:1 is killed: its launcher restarts it, worker:0 exits 3 and its
// launcher restarts it (a new coordination service); the two meet again,
// resume from the chief's checkpoint (broadcast to worker:1) and end with
// the weights of an uninterrupted run.
TEST_F(LaunchRealWorkerTest, ClusterLaunchersRestartTogetherFromTheChiefsCheckpointToTheSameWeights) {
  const std::string want = UninterruptedFingerprint();
  ASSERT_FALSE(want.empty());

  // Held for the test: nothing else gets them, the chief can still bind.
  auto port0 = PortReservation::Reserve();
  auto port1 = PortReservation::Reserve();
  ASSERT_TRUE(port0.ok() && port1.ok());
  const std::string cluster =
      R"({"worker":[")" + port0->address() + R"(",")" + port1->address() + R"("]})";
  auto host = [&](int index) {
    const fs::path run = dir_ / ("host" + std::to_string(index));
    std::vector<std::string> argv = {kLauncher, "cluster", "--tf-config",
                                     R"({"cluster":)" + cluster + R"(,"task":{"type":"worker","index":)" +
                                         std::to_string(index) + "}}",
                                     "--run-dir", run.string(), "--grace-period", "3", "--max-restarts", "1",
                                     "--", "--model", "mlp", "--cpu-replicas", "1", "--max-steps",
                                     std::to_string(kSteps), "--checkpoint-every", "10", "--log-every", "1",
                                     "--no-validate"};
    return std::make_unique<Launch>(argv, std::vector<std::string>{"MIRRORED_JOB_TOKEN=cluster-restart-test"});
  };
  auto chief = host(0);
  auto other = host(1);
  std::map<int, pid_t> pids;
  ASSERT_TRUE(WaitUntil([&] { return (pids = WorkerPids(dir_ / "host1")).count(1) == 1; }, 20s));
  ASSERT_TRUE(chief->ReadUntil("[worker:0] step 15/" + std::to_string(kSteps), 30s)) << chief->output();
  ASSERT_EQ(chief->output().find("[worker:0] done:"), std::string::npos) << "the job ended before the kill";
  ASSERT_EQ(kill(pids[1], SIGKILL), 0) << "worker:1 (pid " << pids[1] << ") was already gone";

  auto chief_exit = chief->Finish(90s);
  auto other_exit = other->Finish(30s);
  ASSERT_TRUE(chief_exit && other_exit) << "worker:0's launcher:\n"
                                        << chief->output() << "\nworker:1's launcher:\n"
                                        << other->output();
  EXPECT_TRUE(chief_exit->success()) << chief_exit->ToString() << "\n" << chief->output();
  EXPECT_TRUE(other_exit->success()) << other_exit->ToString() << "\n" << other->output();
  EXPECT_NE(other->output().find("first failure: task worker:1 ended with signal SIGKILL (9)"), std::string::npos)
      << other->output();
  // worker:0's launcher saw its task stop because of worker:1.
  EXPECT_NE(chief->output().find("first failure: task worker:0 ended with exit code 3"), std::string::npos)
      << chief->output();
  for (Launch* l : {chief.get(), other.get()})
    EXPECT_NE(l->output().find("job succeeded after 1 restart"), std::string::npos) << l->output();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(chief->output(), m, std::regex("\\[worker:0\\] .*resuming from \\S*ckpt-(\\d+)")))
      << chief->output();
  EXPECT_GE(std::stoi(m[1].str()), 10);
  EXPECT_FALSE(fs::exists(dir_ / "host1" / "checkpoints")) << "only the chief writes checkpoints";
  EXPECT_EQ(Fingerprint(chief->output()), want) << chief->output();
  std::printf("cluster restart resumed from ckpt-%s; fingerprint %s (uninterrupted %s)\n", m[1].str().c_str(),
              Fingerprint(chief->output()).c_str(), want.c_str());
}

}  // namespace
}  // namespace mirrored
