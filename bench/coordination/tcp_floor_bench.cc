// tcp_floor_bench: the floor under coordination_bench. The same shape of
// rendezvous with no gRPC: one server (this process, epoll, one thread)
// and P client processes holding N/P TCP connections each over loopback;
// every client sends a 64-byte "registration" on each connection and the
// server answers all of them once the last has arrived. What is left
// between this and coordination_bench's figures is gRPC's (HTTP/2, calls,
// threads), not the kernel's.
//
//   tcp_floor_bench                         # 256, 1024, 4096 connections, 4 processes
//   tcp_floor_bench --connections 1024 --client-processes 4
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// How long the server waits for any event before calling the run failed.
constexpr std::chrono::milliseconds kEventTimeout{10000};
constexpr size_t kMessageBytes = 64;
constexpr int kListenBacklog = 65535;

double CpuMs(int who) {
  rusage r{};
  getrusage(who, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A client process: connections first..N step `step`, a message on each,
// then the answers. Exits 0 when every answer came.
[[noreturn]] void RunClient(const sockaddr_in& server, int first, int step, int total) {
  std::vector<int> fds;
  char message[kMessageBytes] = {1};
  for (int i = first; i < total; i += step) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    NoDelay(fd);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) != 0) _exit(1);
    if (write(fd, message, sizeof(message)) != static_cast<ssize_t>(sizeof(message))) _exit(1);
    fds.push_back(fd);
  }
  for (int fd : fds) {
    if (read(fd, message, sizeof(message)) != static_cast<ssize_t>(sizeof(message))) _exit(2);
  }
  _exit(0);
}

struct Figures {
  double accepted_ms = 0, answered_ms = 0, server_cpu_ms = 0, clients_cpu_ms = 0;
};

// Accepts every connection and reads its message; returns the connections
// (false on a timeout). `accepted_ms` is when the last one was accepted.
bool AcceptAndRead(int listener, int n, Clock::time_point t0, std::vector<int>* conns, double* accepted_ms) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  std::vector<epoll_event> events(256);
  char message[kMessageBytes];
  for (int got = 0; got < n;) {
    int k = epoll_wait(ep, events.data(), static_cast<int>(events.size()), static_cast<int>(kEventTimeout.count()));
    if (k <= 0) {
      close(ep);
      return false;
    }
    for (int i = 0; i < k; ++i) {
      const int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd != listener) {
        if (read(fd, message, sizeof(message)) == static_cast<ssize_t>(sizeof(message))) ++got;
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        continue;
      }
      for (int c; (c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        NoDelay(c);
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.fd = c;
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
        conns->push_back(c);
      }
      if (static_cast<int>(conns->size()) == n && *accepted_ms == 0) *accepted_ms = MsSince(t0);
    }
  }
  close(ep);
  return true;
}

bool RunOnce(int n, int processes, Figures* f) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, kListenBacklog) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("tcp_floor_bench: listen");
    return false;
  }
  const auto t0 = Clock::now();
  const double cpu0 = CpuMs(RUSAGE_SELF), children0 = CpuMs(RUSAGE_CHILDREN);
  std::vector<pid_t> clients;
  for (int p = 0; p < processes; ++p) {
    pid_t pid = fork();
    if (pid == 0) RunClient(addr, p, processes, n);
    clients.push_back(pid);
  }
  std::vector<int> conns;
  const bool ok = AcceptAndRead(listener, n, t0, &conns, &f->accepted_ms);
  char answer[kMessageBytes] = {2};
  for (int c : conns) {
    if (ok) (void)!write(c, answer, sizeof(answer));
  }
  f->answered_ms = MsSince(t0);
  f->server_cpu_ms = CpuMs(RUSAGE_SELF) - cpu0;
  bool clients_ok = ok;
  for (pid_t pid : clients) {
    if (!ok) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    clients_ok = clients_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  f->clients_cpu_ms = CpuMs(RUSAGE_CHILDREN) - children0;
  for (int c : conns) close(c);
  close(listener);
  return clients_ok;
}

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::atoi(item.c_str()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts{256, 1024, 4096};
  int processes = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--connections") {
      counts = ParseList(argv[i + 1]);
    } else if (flag == "--client-processes") {
      processes = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--connections 256,1024] [--client-processes P]\n", argv[0]);
      return 2;
    }
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  std::printf("# tcp_floor_bench: one epoll server thread, %d client processes, one loopback TCP connection "
              "per task, a 64-byte message each way; no gRPC\n",
              processes);
  std::printf("# %11s %12s %12s %15s %15s\n", "connections", "accepted ms", "answered ms", "server CPU ms",
              "clients CPU ms");
  for (int n : counts) {
    Figures f;
    if (!RunOnce(n, processes, &f)) {
      std::fprintf(stderr, "tcp_floor_bench: the run with %d connections failed\n", n);
      return 1;
    }
    std::printf("  %11d %12.1f %12.1f %15.1f %15.1f\n", n, f.accepted_ms, f.answered_ms, f.server_cpu_ms,
                f.clients_cpu_ms);
  }
  return 0;
}
