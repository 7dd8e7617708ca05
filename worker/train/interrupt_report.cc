#include "worker/train/interrupt_report.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/logging.h"

namespace mirrored {
namespace {

constexpr char kInterrupted = 'I';
constexpr char kQuit = 'Q';

// The pipe lives as long as the process: the handler may read its write end
// at any time, so it is never closed (nor its number reused).
int g_pipe[2] = {-1, -1};
std::once_flag g_pipe_once;
std::atomic<bool> g_armed{false};

void OnSigint(int) {
  const int saved = errno;
  const char byte = kInterrupted;
  if (g_armed.load()) (void)!write(g_pipe[1], &byte, 1);
  errno = saved;
}

bool MakePipe() {
  std::call_once(g_pipe_once, [] {
    if (pipe2(g_pipe, O_CLOEXEC) != 0) g_pipe[0] = g_pipe[1] = -1;
  });
  return g_pipe[1] >= 0;
}

// Bytes left from an earlier instance (a kQuit, or a signal that raced its
// end) must not be read by this one.
void DrainPipe() {
  const int flags = fcntl(g_pipe[0], F_GETFL);
  fcntl(g_pipe[0], F_SETFL, flags | O_NONBLOCK);
  char buf[64];
  while (read(g_pipe[0], buf, sizeof(buf)) > 0) {
  }
  fcntl(g_pipe[0], F_SETFL, flags);
}

}  // namespace

InterruptReport::InterruptReport(std::function<void(const Status&)> report) : report_(std::move(report)) {
  struct sigaction current {};
  sigaction(SIGINT, nullptr, &current);
  if (current.sa_handler == SIG_IGN) return;  // nohup, or `&` in a script: SIGINT stays ignored
  if (!MakePipe()) {
    MIRRORED_LOG(WARNING) << "no SIGINT report (pipe2 failed): a Ctrl-C here ends this task without telling the others why";
    return;
  }
  DrainPipe();
  thread_ = std::thread([this] { Watch(); });
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  g_armed.store(true);
  sigaction(SIGINT, &sa, &previous_);
  installed_ = true;
}

InterruptReport::~InterruptReport() {
  if (!installed_) return;
  sigaction(SIGINT, &previous_, nullptr);
  g_armed.store(false);
  const char byte = kQuit;
  (void)!write(g_pipe[1], &byte, 1);
  thread_.join();
}

void InterruptReport::Watch() {
  char byte = 0;
  ssize_t n;
  do {
    n = read(g_pipe[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1 || byte != kInterrupted) return;  // the task ended without a SIGINT
  // The report is a call to the chief's service, which may be gone: it is
  // given kInterruptReportWait, then the process ends by SIGINT all the same.
  auto sent = std::make_shared<std::promise<void>>();
  std::future<void> done = sent->get_future();
  std::thread([report = report_, sent] {
    report(CancelledError(std::string(kInterruptedOnItsHost)));
    sent->set_value();
  }).detach();
  (void)done.wait_for(kInterruptReportWait);
  signal(SIGINT, SIG_DFL);
  raise(SIGINT);
}

}  // namespace mirrored
