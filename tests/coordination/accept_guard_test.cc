// The accept guard (worker/coordination/accept_guard.h) on real sockets: a
// child process floods two listeners while this process's soft descriptor
// limit is low. On the guarded one accept4 never hands out a descriptor in
// the reserve and never fails with EMFILE; the unguarded one is untouched.
#include "worker/coordination/accept_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace mirrored::coordination {
namespace {

constexpr int kFloodConnections = 150;
constexpr rlim_t kLowLimit = 128;

int Listen(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(listen(fd, kFloodConnections * 2), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// A child connects kFloodConnections times to `port` and holds them until
// its parent closes `hold`; returns once every connection is made.
pid_t Flood(int port, int* hold) {
  int ready[2], wait_for[2];
  EXPECT_EQ(pipe(ready), 0);
  EXPECT_EQ(pipe(wait_for), 0);
  pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    close(wait_for[1]);
    std::vector<int> held;
    for (int i = 0; i < kFloodConnections; ++i) {
      int c = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(port);
      if (connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) held.push_back(c);
    }
    char done = 1;
    (void)!write(ready[1], &done, 1);
    (void)!read(wait_for[0], &done, 1);
    _exit(0);
  }
  close(ready[1]);
  close(wait_for[0]);
  char done;
  EXPECT_EQ(read(ready[0], &done, 1), 1);
  close(ready[0]);
  *hold = wait_for[1];
  return child;
}

struct Drained {
  int accepted = 0;
  int highest = -1;
  int last_errno = 0;
  std::vector<int> fds;
};

Drained DrainListener(int listener) {
  Drained d;
  for (;;) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      d.last_errno = errno;
      return d;
    }
    ++d.accepted;
    d.highest = std::max(d.highest, fd);
    d.fds.push_back(fd);
  }
}

class AcceptGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved_), 0);
    if (saved_.rlim_max < kLowLimit) GTEST_SKIP() << "hard descriptor limit below " << kLowLimit;
  }
  void LowerLimit() {
    rlimit low = saved_;
    low.rlim_cur = kLowLimit;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  }
  void TearDown() override { setrlimit(RLIMIT_NOFILE, &saved_); }
  rlimit saved_{};
};

TEST_F(AcceptGuardTest, ReserveIsASixteenthAndAtLeastTheMinimum) {
  EXPECT_EQ(DescriptorReserve(256), kMinDescriptorReserve);
  EXPECT_EQ(DescriptorReserve(1024), kMinDescriptorReserve);
  EXPECT_EQ(DescriptorReserve(1 << 20), uint64_t{1} << 16);
}

TEST_F(AcceptGuardTest, GuardedListenerKeepsTheReserveAndNeverFailsWithEmfile) {
  int port = 0;
  int listener = Listen(&port);
  GuardAccepts(port);
  int hold = -1;
  pid_t child = Flood(port, &hold);
  const uint64_t refused_before = AcceptsRefused();
  LowerLimit();
  Drained d = DrainListener(listener);
  TearDown();
  UnguardAccepts(port);
  EXPECT_EQ(d.last_errno, EAGAIN) << "the queue is drained, not failed";
  EXPECT_GT(d.accepted, 0);
  EXPECT_LT(static_cast<uint64_t>(d.highest) + DescriptorReserve(kLowLimit), kLowLimit)
      << "a connection took a descriptor of the reserve";
  EXPECT_EQ(static_cast<uint64_t>(d.accepted) + (AcceptsRefused() - refused_before),
            static_cast<uint64_t>(kFloodConnections))
      << "every queued connection was either accepted or refused";
  // A descriptor for the chief's own files is still there.
  LowerLimit();
  int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  TearDown();
  EXPECT_GE(file, 0) << strerror(errno);
  close(file);
  for (int fd : d.fds) close(fd);
  close(hold);
  waitpid(child, nullptr, 0);
  close(listener);
}

TEST_F(AcceptGuardTest, UnguardedListenerStillRunsOutAsBefore) {
  int port = 0;
  int listener = Listen(&port);
  int hold = -1;
  pid_t child = Flood(port, &hold);
  const uint64_t refused_before = AcceptsRefused();
  LowerLimit();
  Drained d = DrainListener(listener);
  TearDown();
  EXPECT_EQ(d.last_errno, EMFILE);
  EXPECT_EQ(AcceptsRefused(), refused_before);
  for (int fd : d.fds) close(fd);
  close(hold);
  waitpid(child, nullptr, 0);
  close(listener);
}

}  // namespace
}  // namespace mirrored::coordination
