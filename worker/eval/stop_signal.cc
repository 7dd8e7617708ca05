#include "worker/eval/stop_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

namespace mirrored {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free value");

void OnSignal(int sig) {
  const int saved = errno;
  g_signal.store(sig);
  const char byte = static_cast<char>(sig);
  if (g_pipe[1] >= 0) (void)!write(g_pipe[1], &byte, 1);
  errno = saved;
}

}  // namespace

void StopSignal::Install() {
  if (g_pipe[0] < 0 && pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::optional<int> StopSignal::WaitFor(std::chrono::milliseconds timeout) {
  if (int sig = g_signal.load(); sig != 0) return sig;
  if (g_pipe[0] < 0) {  // not installed: a plain wait
    std::this_thread::sleep_for(timeout);
  } else if (timeout.count() > 0) {
    pollfd fd{g_pipe[0], POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // EINTR (the signal itself, or another) re-checks the flag.
    while (g_signal.load() == 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      if (poll(&fd, 1, static_cast<int>(left.count())) > 0) break;
    }
  }
  if (int sig = g_signal.load(); sig != 0) return sig;
  return std::nullopt;
}

}  // namespace mirrored
