#include "worker/coordination/accept_guard.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "common/logging.h"

namespace mirrored::coordination {
namespace {

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

// Ports being guarded; 0 is a free slot. Read on every accept4 of the
// process, so lock-free.
std::atomic<int> guarded_ports[kMaxGuardedPorts];
std::atomic<uint64_t> refused{0};

Accept4Fn RealAccept4() {
  static const auto real = reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  return real;
}

bool IsGuarded(int listener) {
  bool any = false;
  for (const auto& slot : guarded_ports) any = any || slot.load(std::memory_order_relaxed) != 0;
  if (!any) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  int port = 0;
  if (addr.ss_family == AF_INET) port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  for (const auto& slot : guarded_ports) {
    if (port != 0 && slot.load(std::memory_order_relaxed) == port) return true;
  }
  return false;
}

bool InReserve(int fd) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return false;
  const uint64_t soft = limit.rlim_cur;
  return static_cast<uint64_t>(fd) + DescriptorReserve(soft) >= soft;
}

// Said on the first refusal and then at each power of two, not per
// connection: a flood would otherwise fill the log.
void NoteRefused(int listener, const char* why) {
  const uint64_t n = refused.fetch_add(1) + 1;
  if ((n & (n - 1)) != 0) return;
  MIRRORED_LOG(WARNING) << "coordination service: refused " << n << " connection(s) so far (listener descriptor "
                        << listener << "): " << why
                        << "; descriptors are kept for the chief's checkpoints and logs (a connection flood?)";
}

}  // namespace

uint64_t DescriptorReserve(uint64_t limit) { return std::max(kMinDescriptorReserve, limit / 16); }

void GuardAccepts(int port) {
  for (auto& slot : guarded_ports) {
    int free_slot = 0;
    if (slot.compare_exchange_strong(free_slot, port)) return;
  }
  MIRRORED_LOG(WARNING) << "coordination service: more than " << kMaxGuardedPorts
                        << " services in one process; port " << port << " is not guarded against connection floods";
}

void UnguardAccepts(int port) {
  for (auto& slot : guarded_ports) {
    int expected = port;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

uint64_t AcceptsRefused() { return refused.load(); }

}  // namespace mirrored::coordination

// The process's accept4: see accept_guard.h.
extern "C" int accept4(int listener, sockaddr* addr, socklen_t* len, int flags) {
  using namespace mirrored::coordination;
  int fd = RealAccept4()(listener, addr, len, flags);
  const int saved = errno;
  const bool guarded = IsGuarded(listener);
  errno = saved;
  if (!guarded) return fd;
  // Drain what is queued beyond the reserve: gRPC's poller is edge
  // triggered and is told of queued connections only once.
  while (fd >= 0 && InReserve(fd)) {
    close(fd);
    NoteRefused(listener, "its descriptor would fall in the reserve");
    fd = RealAccept4()(listener, addr, len, flags);
  }
  if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
    NoteRefused(listener, "no descriptor left");
    errno = EAGAIN;
    return -1;
  }
  return fd;
}
