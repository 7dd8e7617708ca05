// The run directory's two small coordination files: the chief's lock
// (one job per run directory) and the training-done record evaluators read.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

#include "common/run_dir/run_dir_lock.h"
#include "worker/checkpoint/training_done.h"
#include "worker/checkpoint/training_start.h"

namespace mirrored {
namespace {

namespace fs = std::filesystem;

class RunDirFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mirrored-run-dir-files-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(RunDirFilesTest, SecondChiefIsRefusedNamingTheFirstUntilItsLockIsGone) {
  auto first = RunDirLock::Acquire(dir_.string());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RunDirLock::Acquire(dir_.string());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find("--run-dir " + dir_.string() + " is in use by another job (its chief: pid " +
                                           std::to_string(getpid()) + " on host "),
            std::string::npos)
      << second.status();
  { RunDirLock released = std::move(first).value(); }
  auto third = RunDirLock::Acquire(dir_.string());
  EXPECT_TRUE(third.ok()) << third.status();
}

// mirrored-launch's look before it starts a job: takes no lock, names the
// holder while one on this machine holds it, nothing once it is gone.
TEST_F(RunDirFilesTest, HeldOnThisMachineNamesTheHolderWithoutLocking) {
  EXPECT_FALSE(RunDirLock::HeldOnThisMachine(dir_.string()).has_value());  // no directory
  std::optional<RunDirLock> first;
  {
    auto acquired = RunDirLock::Acquire(dir_.string());
    ASSERT_TRUE(acquired.ok()) << acquired.status();
    first.emplace(std::move(acquired).value());
  }
  auto holder = RunDirLock::HolderOnThisMachineNow(dir_.string());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->rfind("pid " + std::to_string(getpid()) + " on host ", 0), 0u) << *holder;
  first.reset();
  EXPECT_FALSE(RunDirLock::HeldOnThisMachine(dir_.string()).has_value());  // the file stays, unlocked
  EXPECT_TRUE(fs::exists(dir_ / "checkpoints" / "chief.lock"));
  auto again = RunDirLock::Acquire(dir_.string());  // looking took no lock
  EXPECT_TRUE(again.ok()) << again.status();
}

// A holder on another host may have died with the lock on a network file
// system: the new chief waits (bounded) before giving up, instead of failing
// a requeued job at once.
TEST_F(RunDirFilesTest, HolderOnAnotherHostIsWaitedForWithinTheBound) {
  auto first = RunDirLock::Acquire(dir_.string());
  ASSERT_TRUE(first.ok()) << first.status();
  std::ofstream(dir_ / "checkpoints" / kChiefLockFileName, std::ios::trunc)
      << "pid 77 on host some-other-node (boot 0badc0de) since 2026-11-23T00:00:00Z\n";
  const auto start = std::chrono::steady_clock::now();
  auto second = RunDirLock::Acquire(dir_.string(), std::chrono::milliseconds(1200));
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(second.ok());
  EXPECT_GE(waited, std::chrono::milliseconds(1200));
  EXPECT_NE(second.status().message().find("(its chief: pid 77 on host some-other-node (boot 0badc0de) since "
                                           "2026-11-23T00:00:00Z), still after 1.2 s"),
            std::string::npos)
      << second.status();
  // A pod rescheduled on another node keeps its host name: the boot id tells.
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  std::ofstream(dir_ / "checkpoints" / kChiefLockFileName, std::ios::trunc)
      << "pid 77 on host " << host << " (boot 0badc0de) since 2026-11-23T00:00:00Z\n";
  const auto again = std::chrono::steady_clock::now();
  EXPECT_FALSE(RunDirLock::Acquire(dir_.string(), std::chrono::milliseconds(600)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - again, std::chrono::milliseconds(600));
}

// A holder on this machine (same host name and boot) is a live job: the
// kernel drops a dead process's lock. Refused at once, whatever the wait.
// A live holder on this machine is refused after the short wait given to a
// dying one, not the remote wait.
TEST_F(RunDirFilesTest, HolderOnThisMachineIsRefusedAfterTheDyingHolderWaitOnly) {
  auto first = RunDirLock::Acquire(dir_.string());
  ASSERT_TRUE(first.ok()) << first.status();
  const auto start = std::chrono::steady_clock::now();
  auto second = RunDirLock::Acquire(dir_.string(), std::chrono::seconds(60));
  EXPECT_FALSE(second.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, kHolderGrace);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(second.status().message().find("still after 3 s"), std::string::npos) << second.status();
  EXPECT_TRUE(RunDirLock::HolderOnThisMachineNow(dir_.string()).has_value());
}

// A job whose launcher was just killed still holds the lock for the moment
// its tasks take to die: the next job, started at once, gets it.
TEST_F(RunDirFilesTest, ADyingHolderOnThisMachineIsWaitedFor) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    auto lock = RunDirLock::Acquire(dir_.string());
    char c = lock.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();  // until killed, holding the lock
    _exit(0);
  }
  struct Reaper {
    pid_t pid;
    int fds[2];
    ~Reaper() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(fds[0]);
      close(fds[1]);
    }
  } reaper{holder, {ready[0], ready[1]}};
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  ASSERT_TRUE(RunDirLock::HolderOnThisMachineNow(dir_.string()).has_value());
  // The holder dies a moment after the new job starts looking (the scenario,
  // not a synchronisation).
  const auto start = std::chrono::steady_clock::now();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(holder, SIGKILL);
  });
  auto lock = RunDirLock::Acquire(dir_.string());
  killer.join();
  EXPECT_TRUE(lock.ok()) << lock.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));  // it did wait
}

// mirrored-launch (HeldOnThisMachine) and a lone evaluator (ChiefLockHeld)
// look at the chief's lock with a shared flock, dropped at once. A chief
// locking in that instant, whose file still names an earlier chief on
// another host, must not take the look for that chief: it was refused at
// once with no remote wait (and otherwise warned about the gone chief and
// waited half a second).
TEST_F(RunDirFilesTest, AChiefLockingWhileTheLockIsLookedAtGetsItWhenTheLookEnds) {
  { ASSERT_TRUE(RunDirLock::Acquire(dir_.string()).ok()); }  // the file, unlocked
  const fs::path path = dir_ / "checkpoints" / kChiefLockFileName;
  std::ofstream(path, std::ios::trunc) << "pid 77 on host some-other-node (boot 0badc0de) since 2026-11-23T00:00:00Z\n";
  const int look = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(look, 0);
  ASSERT_EQ(flock(look, LOCK_SH | LOCK_NB), 0);  // a look, caught before it drops its lock
  EXPECT_FALSE(RunDirLock::ChiefLockHeld(dir_.string()));  // looks do not see each other
  auto chief = std::async(std::launch::async, [&] { return RunDirLock::Acquire(dir_.string()); });
  // Not refused while the look lasts (no real look lasts this long) ...
  const bool ended_during_the_look = chief.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready;
  flock(look, LOCK_UN);
  close(look);
  EXPECT_FALSE(ended_during_the_look);
  // ... and the lock is the chief's once it ends.
  ASSERT_EQ(chief.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto lock = chief.get();
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_TRUE(RunDirLock::ChiefLockHeld(dir_.string()));
}

// Shared locks that last are not mirrored's looks: refused after the wait
// given to a holder on this machine, saying what is in the way.
TEST_F(RunDirFilesTest, ALastingSharedLockIsRefusedAfterTheHolderGrace) {
  { ASSERT_TRUE(RunDirLock::Acquire(dir_.string()).ok()); }
  const fs::path path = dir_ / "checkpoints" / kChiefLockFileName;
  const int look = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(look, 0);
  ASSERT_EQ(flock(look, LOCK_SH | LOCK_NB), 0);
  const auto start = std::chrono::steady_clock::now();
  auto lock = RunDirLock::Acquire(dir_.string(), std::chrono::seconds(60));
  close(look);
  ASSERT_FALSE(lock.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, kHolderGrace);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  // No job is in the way: the message names the file and how to find the
  // process (it said "in use by another job (its chief: none, ...)").
  EXPECT_EQ(lock.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lock.status().message().find("--run-dir " + dir_.string() + " cannot be locked: a process holds a shared "
                                         "lock on " + path.string() + ", still after 3 s"),
            std::string::npos)
      << lock.status();
  EXPECT_NE(lock.status().message().find("`fuser -v " + path.string() + "` or `lslocks`"), std::string::npos)
      << lock.status();
  EXPECT_EQ(lock.status().message().find("another job"), std::string::npos) << lock.status();
}

// A chief that waited longer than kHolderGrace for a holder on another host
// (an NFS lease of a dead host) and then finds only a look at the lock gives
// the look kHolderGrace of its own: it was refused at once, the grace
// counted from its first attempt.
TEST_F(RunDirFilesTest, ALookAfterALongWaitForARemoteHolderIsGivenItsOwnGrace) {
  { ASSERT_TRUE(RunDirLock::Acquire(dir_.string()).ok()); }
  const fs::path path = dir_ / "checkpoints" / kChiefLockFileName;
  const int remote = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(remote, 0);
  ASSERT_EQ(flock(remote, LOCK_EX | LOCK_NB), 0);  // the dead host's lock, as the file server keeps it
  const std::string line = "pid 77 on host some-other-node (boot 0badc0de) since 2026-11-23T00:00:00Z\n";
  ASSERT_EQ(ftruncate(remote, 0), 0);
  ASSERT_EQ(pwrite(remote, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
  const auto start = std::chrono::steady_clock::now();
  auto chief =
      std::async(std::launch::async, [&] { return RunDirLock::Acquire(dir_.string(), std::chrono::seconds(60)); });
  // The scenario: the remote holder outlasts kHolderGrace ...
  ASSERT_EQ(chief.wait_until(start + kHolderGrace + std::chrono::milliseconds(500)), std::future_status::timeout);
  // ... and its lock gives way to a look in the same instant (converted in
  // place: no moment with neither).
  ASSERT_EQ(flock(remote, LOCK_SH | LOCK_NB), 0);
  // Not refused while the look lasts (the chief polls a remote holder every
  // 0.5 s, a look every 20 ms) ...
  const bool ended_during_the_look = chief.wait_for(std::chrono::seconds(1)) == std::future_status::ready;
  flock(remote, LOCK_UN);
  close(remote);
  ASSERT_FALSE(ended_during_the_look) << chief.get().status();
  // ... and the lock is the chief's once it ends.
  ASSERT_EQ(chief.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto lock = chief.get();
  ASSERT_TRUE(lock.ok()) << lock.status();
}

TEST_F(RunDirFilesTest, RunDirThatIsAFileIsRefusedNamingIt) {
  std::ofstream(dir_.string()) << "x";
  auto lock = RunDirLock::Acquire(dir_.string());
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lock.status().message().find("--run-dir " + dir_.string() + ": cannot create"), std::string::npos)
      << lock.status();
  fs::remove(dir_);
}

TEST_F(RunDirFilesTest, TrainingStartRoundTripsWithANewRunEachTimeAndDamageIsDataLoss) {
  fs::create_directories(dir_);
  auto none = TrainingStart::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  auto run = TrainingStart::Write(FileEnv::Default(), dir_.string(), 400);  // makes checkpoints/
  ASSERT_TRUE(run.ok()) << run.status();
  auto start = TrainingStart::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(start.ok() && start->has_value()) << start.status();
  EXPECT_EQ((*start)->from_step, 400);
  EXPECT_EQ((*start)->run, *run);
  auto again = TrainingStart::Write(FileEnv::Default(), dir_.string(), 400);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *run);
  std::ofstream(dir_ / "checkpoints" / "training-start", std::ios::trunc) << "{\"from_step\": \"x\"}";
  auto damaged = TrainingStart::Read(FileEnv::Default(), dir_.string());
  EXPECT_EQ(damaged.status().code(), StatusCode::kDataLoss) << damaged.status();
}

TEST_F(RunDirFilesTest, TrainingDoneRoundTripsAndDamageIsDataLoss) {
  fs::create_directories(dir_ / "checkpoints");
  auto none = TrainingDone::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  const double before = UnixNow();
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 500).ok());
  auto done = TrainingDone::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(done.ok() && done->has_value()) << done.status();
  EXPECT_EQ((*done)->step, 500);
  EXPECT_GE((*done)->time, before);
  EXPECT_LE((*done)->time, UnixNow());
  // Every record is a new run's, even for the same step (what evaluators compare).
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 500).ok());
  auto again = TrainingDone::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_NE((*again)->run, (*done)->run);
  ASSERT_TRUE(TrainingDone::Remove(FileEnv::Default(), dir_.string()).ok());
  auto removed = TrainingDone::Read(FileEnv::Default(), dir_.string());
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->has_value());
  ASSERT_TRUE(TrainingDone::Remove(FileEnv::Default(), dir_.string()).ok());  // none is fine
  ASSERT_TRUE(TrainingDone::Write(FileEnv::Default(), dir_.string(), 500).ok());

  std::ofstream(dir_ / "checkpoints" / kTrainingDoneFileName) << "{\"step\": \"x\"}";
  auto damaged = TrainingDone::Read(FileEnv::Default(), dir_.string());
  EXPECT_EQ(damaged.status().code(), StatusCode::kDataLoss) << damaged.status();
}

}  // namespace
}  // namespace mirrored
