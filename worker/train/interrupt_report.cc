#include "worker/train/interrupt_report.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "common/logging.h"

namespace mirrored {
namespace {

std::atomic<int> g_write_fd{-1};

void OnSigint(int) {
  const int saved = errno;
  const int fd = g_write_fd.load();
  const char byte = 'I';
  if (fd >= 0) (void)!write(fd, &byte, 1);
  errno = saved;
}

}  // namespace

InterruptReport::InterruptReport(std::function<void(const Status&)> report) : report_(std::move(report)) {
  if (pipe2(pipe_, O_CLOEXEC) != 0) {
    MIRRORED_LOG(WARNING) << "no SIGINT report (pipe2 failed): a Ctrl-C here ends this task without telling the others why";
    return;
  }
  thread_ = std::thread([this] { Watch(); });
  g_write_fd.store(pipe_[1]);
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

InterruptReport::~InterruptReport() {
  if (pipe_[1] < 0) return;
  signal(SIGINT, SIG_DFL);
  g_write_fd.store(-1);
  close(pipe_[1]);  // the watcher reads end-of-file and returns
  thread_.join();
  close(pipe_[0]);
}

void InterruptReport::Watch() {
  char byte = 0;
  ssize_t n;
  do {
    n = read(pipe_[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return;  // closed: the task ended without a SIGINT
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
