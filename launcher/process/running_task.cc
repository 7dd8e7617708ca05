#include "launcher/process/running_task.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/launcher_environment.h"
#include "common/status.h"

namespace mirrored {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

bool EndedBecauseStopped(const RunningTask& t, const ProcessExit& e) {
  if (!t.signal_sent) return false;
  if (e.signal) return *e.signal == *t.signal_sent || (*e.signal == SIGKILL && t.killed);
  int code = *e.exit_code;
  return code == kExitPeerFailed || code == 128 + *t.signal_sent || code == 128 + SIGTERM;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

void PumpOutput(RunningTask& t) {
  char buf[65536];
  while (t.out_fd >= 0) {
    ssize_t n = read(t.out_fd, buf, sizeof(buf));
    if (n > 0) {
      t.tee->Append(std::string_view(buf, static_cast<size_t>(n)));
      t.last_output = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    t.tee->Finish();
    CloseFd(t.out_fd);
  }
}

void ReadLiveness(RunningTask& t) {
  char buf[64];
  ssize_t n;
  while ((n = read(t.liveness_fd, buf, sizeof(buf))) > 0) {
    t.last_alive = Clock::now();
    t.liveness_armed = buf[n - 1] != 'S';
  }
  if (n == 0) CloseFd(t.liveness_fd);  // it exited (or closed it)
}

bool StartAgain(RunningTask& t, bool training_ended, ConsoleWriter* console) {
  if (t.log_fd >= 0) WriteLogHeader(t.log_fd, t.launch->name + " started again");
  std::vector<std::string> env = t.launch->env;
  if (training_ended) env.push_back(std::string(kTrainingEndedVariable) + "=1");
  auto child = ChildProcess::Spawn(t.launch->argv, env);
  if (!child.ok()) {
    if (console != nullptr) {
      console->WriteLine("[mirrored-launch] ", "cannot start " + t.launch->name + " again: " + child.status().message());
    }
    return false;
  }
  ++t.restarts;
  t.restart_at.reset();
  t.failed_exit.reset();
  t.out_fd = child->TakeOutputFd();
  t.child.emplace(std::move(child).value());
  t.signal_sent.reset();
  t.killed = false;
  t.last_output = Clock::now();
  return true;
}

}  // namespace mirrored
