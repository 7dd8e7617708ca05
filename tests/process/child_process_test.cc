#include "launcher/process/child_process.h"
#include "tests/util/process_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace mirrored {
namespace {

using testing_util::ProcessAlive;
using testing_util::ReadWholeFile;
using testing_util::WaitUntil;

using namespace std::chrono_literals;

std::vector<std::string> Env() { return {"PATH=/usr/bin:/bin", "GREETING=hello"}; }

// Reads the child's output until EOF or the deadline.
std::string ReadAll(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(ChildProcessTest, RunsWithTheGivenEnvironmentAndMergesOutput) {
  auto child = ChildProcess::Spawn({"sh", "-c", "echo out $GREETING; echo err >&2; exit 3"}, Env());
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out = ReadAll(child->output_fd(), 5s);
  EXPECT_EQ(out, "out hello\nerr\n");
  auto exit = child->WaitFor(5s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_EQ(exit->ToString(), "exit code 3");
  EXPECT_EQ(exit->ShellCode(), 3);
}

TEST(ChildProcessTest, RunsInItsOwnProcessGroup) {
  auto child = ChildProcess::Spawn({"sh", "-c", "exec sleep 30"}, Env());
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(getpgid(child->pid()), child->pid());
  EXPECT_NE(getpgid(child->pid()), getpgid(0));
}

TEST(ChildProcessTest, MissingBinaryIsNotFound) {
  auto child = ChildProcess::Spawn({"/nonexistent/mirrored-worker"}, Env());
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(child.status().message(),
            "cannot start \"/nonexistent/mirrored-worker\": No such file or directory");
}

TEST(ChildProcessTest, NonExecutableBinaryIsPermissionDenied) {
  char path[] = "/tmp/mirrored-not-exec-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "#!/bin/sh\n", 10), 10);
  close(fd);
  chmod(path, 0644);
  auto child = ChildProcess::Spawn({path}, Env());
  unlink(path);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(child.status().message().find("Permission denied"), std::string::npos);
}

TEST(ChildProcessTest, SignalGroupReachesGrandchildren) {
  auto child = ChildProcess::Spawn({"sh", "-c", "sleep 30 & echo $!; wait"}, Env());
  ASSERT_TRUE(child.ok()) << child.status();
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{child->output_fd(), POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[64];
    ssize_t n = read(child->output_fd(), buf, sizeof(buf));
    if (n > 0) line.append(buf, static_cast<size_t>(n));
  }
  pid_t grandchild = std::stoi(line);
  child->SignalGroup(SIGTERM);
  auto exit = child->WaitFor(5s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_EQ(exit->ToString(), "signal SIGTERM (15)");
  EXPECT_EQ(exit->ShellCode(), 143);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(grandchild); }, 2s)) << "grandchild " << grandchild << " survived";
}

TEST(ChildProcessTest, WaitForTimesOutOnARunningChild) {
  auto child = ChildProcess::Spawn({"sleep", "30"}, Env());
  ASSERT_TRUE(child.ok()) << child.status();
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(child->WaitFor(100ms).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  // The destructor kills and reaps it.
}

TEST(ChildProcessTest, DestructorLeavesNoProcessBehind) {
  pid_t pid;
  {
    auto child = ChildProcess::Spawn({"sleep", "30"}, Env());
    ASSERT_TRUE(child.ok()) << child.status();
    pid = child->pid();
  }
  EXPECT_FALSE(ProcessAlive(pid));
}

// The launcher dies by SIGKILL (no cleanup code runs): its children must die
// with it, through PR_SET_PDEATHSIG.
TEST(ChildProcessTest, ChildDiesWhenTheLauncherIsKilled) {
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    close(report[0]);
    auto child = ChildProcess::Spawn({"sleep", "30"}, Env());
    pid_t pid = child.ok() ? child->pid() : -1;
    (void)!write(report[1], &pid, sizeof(pid));
    pause();  // until SIGKILLed by the test
    _exit(0);
  }
  close(report[1]);
  pid_t worker = -1;
  ASSERT_EQ(read(report[0], &worker, sizeof(worker)), static_cast<ssize_t>(sizeof(worker)));
  close(report[0]);
  ASSERT_GT(worker, 0);
  EXPECT_TRUE(ProcessAlive(worker));
  kill(launcher, SIGKILL);
  int status;
  waitpid(launcher, &status, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(worker); }, 2s)) << "worker " << worker << " outlived its launcher";
}

}  // namespace
}  // namespace mirrored
