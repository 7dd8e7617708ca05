// One child process of the launcher: started in its own process group, tied
// to the launcher's life, its stdout and stderr merged into one pipe that the
// launcher reads.
//
//   auto child = ChildProcess::Spawn({"/bin/mirrored-worker", "--epochs", "1"}, env);
//   if (!child.ok()) return child.status();       // names the binary and why
//   child->SignalGroup(SIGTERM); auto exit = child->WaitFor(std::chrono::seconds(10));
//
// Invariants: the child is the leader of a new process group (pgid == pid),
// so SignalGroup reaches everything it started. It dies with SIGKILL when the
// thread that spawned it exits (PR_SET_PDEATHSIG), which covers a SIGKILLed
// launcher: spawn from a thread that lives as long as the job (main thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mirrored {

// How a process ended: exactly one of exit_code / signal is set.
struct ProcessExit {
  std::optional<int> exit_code;
  std::optional<int> signal;

  bool success() const { return exit_code.has_value() && *exit_code == 0; }
  // "exit code 3" or "signal SIGKILL (9)".
  std::string ToString() const;
  // The code a shell would report: the exit code, or 128 + signal.
  int ShellCode() const;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path, or a name looked up in PATH) with `env` as its
  // whole environment ("KEY=VALUE" entries). Errors: NotFound when the binary
  // does not exist, PermissionDenied when it is not executable,
  // InvalidArgument for an empty argv, Internal when fork/pipe fail. The
  // error is known before Spawn returns: exec failures travel back over a
  // close-on-exec pipe.
  // `fd3` (>= 3), when given, is the child's file descriptor 3 (the caller
  // keeps and closes its own copy).
  static StatusOr<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, int fd3 = -1);

  // Runs argv to its end and returns its exit and its stdout + stderr;
  // DeadlineExceeded (the child killed) when it runs past `timeout`.
  static StatusOr<std::pair<ProcessExit, std::string>> RunToEnd(const std::vector<std::string>& argv,
                                                                const std::vector<std::string>& env,
                                                                std::chrono::milliseconds timeout);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills the group and reaps the child if it is still running: no zombie,
  // no orphan, whatever path the owner took.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Read end of the merged stdout+stderr pipe (non-blocking). The owner reads
  // it until EOF; -1 once released with TakeOutputFd.
  int output_fd() const { return output_fd_; }
  // Hands the output fd to the caller, who then closes it.
  int TakeOutputFd();
  // A pidfd that becomes readable when the child ends (poll(2) it with the
  // output fds); -1 on kernels without pidfd_open. Owned by this object.
  int pid_fd() const { return pid_fd_; }

  // Sends `sig` to the whole process group. A group that is already gone is
  // not an error.
  void SignalGroup(int sig) const;

  // Non-blocking: the exit if the child has ended (and reaps it).
  std::optional<ProcessExit> Poll();
  // Waits until the child ends or `timeout` passes; nullopt on timeout.
  std::optional<ProcessExit> WaitFor(std::chrono::milliseconds timeout);
  // The exit once reaped.
  const std::optional<ProcessExit>& exit() const { return exit_; }

 private:
  ChildProcess(pid_t pid, int output_fd, int pid_fd)
      : pid_(pid), output_fd_(output_fd), pid_fd_(pid_fd) {}
  void Release();

  pid_t pid_ = -1;
  int output_fd_ = -1;
  int pid_fd_ = -1;
  std::optional<ProcessExit> exit_;
};

}  // namespace mirrored
