#include "launcher/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/signal_name.h"

namespace mirrored {
namespace {

ProcessExit DecodeWaitStatus(int status) {
  ProcessExit e;
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  else e.exit_code = -1;
  return e;
}

// Child side after fork: only async-signal-safe calls until execve.
[[noreturn]] void ExecChild(pid_t launcher_pid, int out_write, int err_write, int fd3, char* const* argv,
                            char* const* envp, bool search_path) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher may have died between fork and prctl: then nobody would
  // ever deliver the death signal.
  if (getppid() != launcher_pid) _exit(127);
  // Undo the launcher's signal dispositions and mask.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT}) signal(sig, SIG_DFL);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  dup2(out_write, STDOUT_FILENO);
  dup2(out_write, STDERR_FILENO);
  if (fd3 == 3) {
    fcntl(3, F_SETFD, 0);  // kept across exec
  } else if (fd3 > 3) {
    dup2(fd3, 3);          // the copy is not close-on-exec
  }
  if (search_path) execvpe(argv[0], argv, envp);
  else execve(argv[0], argv, envp);
  int err = errno;
  (void)!write(err_write, &err, sizeof(err));
  _exit(127);
}

}  // namespace

StatusOr<std::pair<ProcessExit, std::string>> ChildProcess::RunToEnd(const std::vector<std::string>& argv,
                                                                     const std::vector<std::string>& env,
                                                                     std::chrono::milliseconds timeout) {
  MIRRORED_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(argv, env));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{child.output_fd(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
    const ssize_t n = read(child.output_fd(), buf, sizeof(buf));
    if (n > 0) {
      output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      break;  // EOF
    }
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  std::optional<ProcessExit> exit = child.WaitFor(std::max(left, std::chrono::milliseconds(1)));
  if (!exit) {
    return DeadlineExceededError(argv[0] + " did not end within " + std::to_string(timeout.count()) + " ms");
  }
  return std::make_pair(*exit, output);
}

std::string ProcessExit::ToString() const {
  if (signal) return "signal " + SignalName(*signal);
  return "exit code " + std::to_string(exit_code.value_or(-1));
}

int ProcessExit::ShellCode() const { return signal ? 128 + *signal : exit_code.value_or(1); }

StatusOr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                           const std::vector<std::string>& env, int fd3) {
  if (argv.empty() || argv[0].empty()) return InvalidArgumentError("no program to start");
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const auto& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);
  const bool search_path = argv[0].find('/') == std::string::npos;

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return InternalError(std::string("pipe: ") + strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return InternalError(std::string("pipe: ") + strerror(errno));
  }
  const pid_t launcher_pid = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return InternalError(std::string("fork: ") + strerror(err));
  }
  if (pid == 0) ExecChild(launcher_pid, out_pipe[1], err_pipe[1], fd3, c_argv.data(), c_env.data(), search_path);

  // Parent. Also set the group from this side, so a signal sent to the group
  // right after Spawn returns cannot miss it (either setpgid wins).
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    // exec failed: reap the child and report why.
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(out_pipe[0]);
    std::string what = "cannot start \"" + argv[0] + "\": " + strerror(child_errno);
    if (child_errno == ENOENT) return NotFoundError(what);
    if (child_errno == EACCES || child_errno == ENOEXEC) return PermissionDeniedError(what);
    return InternalError(what);
  }
  fcntl(out_pipe[0], F_SETFL, fcntl(out_pipe[0], F_GETFL) | O_NONBLOCK);
  int pid_fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pid_fd >= 0) fcntl(pid_fd, F_SETFD, FD_CLOEXEC);
  return ChildProcess(pid, out_pipe[0], pid_fd);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), output_fd_(other.output_fd_), pid_fd_(other.pid_fd_), exit_(other.exit_) {
  other.pid_ = -1;
  other.output_fd_ = -1;
  other.pid_fd_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Release();
    pid_ = other.pid_;
    output_fd_ = other.output_fd_;
    pid_fd_ = other.pid_fd_;
    exit_ = other.exit_;
    other.pid_ = -1;
    other.output_fd_ = -1;
    other.pid_fd_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() { Release(); }

void ChildProcess::Release() {
  if (pid_ > 0 && !exit_) {
    SignalGroup(SIGKILL);
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  } else if (pid_ > 0) {
    // The leader is reaped; members it left behind still go.
    SignalGroup(SIGKILL);
  }
  if (output_fd_ >= 0) close(output_fd_);
  if (pid_fd_ >= 0) close(pid_fd_);
  pid_ = -1;
  output_fd_ = -1;
  pid_fd_ = -1;
}

int ChildProcess::TakeOutputFd() {
  int fd = output_fd_;
  output_fd_ = -1;
  return fd;
}

void ChildProcess::SignalGroup(int sig) const {
  if (pid_ > 0) kill(-pid_, sig);
}

std::optional<ProcessExit> ChildProcess::Poll() {
  if (exit_ || pid_ <= 0) return exit_;
  int status;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_ = DecodeWaitStatus(status);
  return exit_;
}

std::optional<ProcessExit> ChildProcess::WaitFor(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (pid_fd_ >= 0) {
    // The pidfd turns readable when the child ends: wait on it directly.
    while (!Poll()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{pid_fd_, POLLIN, 0};
      int r = poll(&p, 1, static_cast<int>(left.count()) + 1);
      if (r < 0 && errno != EINTR) break;  // fall back to the loop below
    }
    if (exit_) return exit_;
  }
  // Without a pidfd waitpid has no timeout; poll it with a short, growing
  // interval: a bounded wait on the child's end, not a sleep standing in for
  // synchronisation.
  auto step = std::chrono::milliseconds(1);
  while (true) {
    if (auto e = Poll()) return e;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(step, deadline - now));
    step = std::min(step * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace mirrored
