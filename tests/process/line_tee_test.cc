#include "launcher/process/line_tee.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace mirrored {
namespace {

// Reads everything written so far to a pipe's read end.
std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

class LineTeeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipe2(console_pipe_, O_NONBLOCK), 0);
    ASSERT_EQ(pipe2(log_pipe_, O_NONBLOCK), 0);
  }
  void TearDown() override {
    for (int fd : {console_pipe_[0], console_pipe_[1], log_pipe_[0], log_pipe_[1]}) close(fd);
  }
  int console_pipe_[2];
  int log_pipe_[2];
};

TEST_F(LineTeeTest, PrefixesWholeLinesWhateverTheChunking) {
  ConsoleWriter console(console_pipe_[1]);
  LineTee tee("[worker:1] ", &console, log_pipe_[1], 20);
  tee.Append("st");
  tee.Append("ep 1\nstep");
  tee.Append(" 2\n\nlast");
  EXPECT_EQ(Drain(console_pipe_[0]), "[worker:1] step 1\n[worker:1] step 2\n[worker:1] \n");
  tee.Finish();
  tee.Finish();
  EXPECT_EQ(Drain(console_pipe_[0]), "[worker:1] last\n");
  EXPECT_EQ(Drain(log_pipe_[0]), "step 1\nstep 2\n\nlast\n");
  EXPECT_EQ(tee.lines_seen(), 4u);
}

// A log file that cannot be written (a full disk: /dev/full) is said once
// on the console; every line still reaches the console.
TEST_F(LineTeeTest, ALogFileThatCannotBeWrittenIsSaidOnceOnTheConsole) {
  const int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) GTEST_SKIP() << "no /dev/full";
  ConsoleWriter console(console_pipe_[1]);
  LineTee tee("[worker:1] ", &console, full, 20);
  tee.Append("step 1\nstep 2\n");
  tee.Append("step 3\n");
  close(full);
  EXPECT_EQ(Drain(console_pipe_[0]),
            "[mirrored-launch] cannot write the log file of worker:1 (No space left on device): its lines from here "
            "on reach the console only\n[worker:1] step 1\n[worker:1] step 2\n[worker:1] step 3\n");
}

TEST_F(LineTeeTest, KeepsOnlyTheLastLines) {
  LineTee tee("", nullptr, -1, 3);
  for (int i = 0; i < 10; ++i) tee.Append("line " + std::to_string(i) + "\n");
  EXPECT_EQ(tee.LastLines(), (std::vector<std::string>{"line 7", "line 8", "line 9"}));
}

TEST_F(LineTeeTest, CutsOverlongLinesAndDropsCarriageReturns) {
  LineTee tee("", nullptr, log_pipe_[1], 10);
  std::string huge(LineTee::kMaxLineBytes + 5, 'x');
  tee.Append(huge);
  tee.Append("\nbar\r\n");
  auto last = tee.LastLines();
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(last[0].size(), LineTee::kMaxLineBytes);
  EXPECT_EQ(last[1], "xxxxx");
  EXPECT_EQ(last[2], "bar");
}

}  // namespace
}  // namespace mirrored
