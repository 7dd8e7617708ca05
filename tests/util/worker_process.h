// A mirrored-worker child of the training tests: its merged stdout+stderr
// collected while the test waits, with a deadline, for a line or its exit.
//
//   auto w = WorkerProcess::Start({kBin + "/mirrored-worker", "--device", "gpu"}, {"PATH=/usr/bin:/bin"});
//   ASSERT_TRUE(w.ok()) << w.status();
//   auto exit = (*w)->WaitExit(std::chrono::seconds(60));   // nullopt: still running
#pragma once

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/process/child_process.h"

namespace mirrored::testing_util {

class WorkerProcess {
 public:
  static StatusOr<std::unique_ptr<WorkerProcess>> Start(const std::vector<std::string>& argv,
                                                        const std::vector<std::string>& env) {
    MIRRORED_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(argv, env));
    return std::unique_ptr<WorkerProcess>(new WorkerProcess(std::move(child)));
  }

  // Reads what is available (the pipe is non-blocking).
  void Pump() {
    char buf[4096];
    ssize_t n;
    while ((n = read(child_.output_fd(), buf, sizeof(buf))) > 0) output_.append(buf, static_cast<size_t>(n));
  }
  // False on timeout or when the process ended without printing `text`.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      Pump();
      if (output_.find(text) != std::string::npos) return true;
      if (exit_ || (exit_ = child_.Poll())) {
        Pump();
        return output_.find(text) != std::string::npos;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::optional<ProcessExit> WaitExit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exit_ && std::chrono::steady_clock::now() < deadline) {
      Pump();
      exit_ = child_.Poll();
      if (!exit_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Pump();
    return exit_;
  }
  ChildProcess& child() { return child_; }
  const std::string& output() const { return output_; }

 private:
  explicit WorkerProcess(ChildProcess child) : child_(std::move(child)) {}
  ChildProcess child_;
  std::string output_;
  std::optional<ProcessExit> exit_;
};

}  // namespace mirrored::testing_util
