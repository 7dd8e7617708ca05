// A SIGINT on a training task of a cluster (a Ctrl-C on its host) still ends
// the task at once, as SIGINT does, but first (within kInterruptReportWait)
// tells the job's coordination service why: the tasks on the other hosts
// then stop naming it ("interrupted on its host") instead of "connection
// lost", and their launchers do not restart the job for a task that will
// not come back (as torchrun closes its rendezvous). A SIGTERM is the
// preemption path instead (preemption.h).
//
//   InterruptReport interrupts([&](const Status& s) { strategy->TellFailureBeforeEnding(s); });
//   ... train ...   // a SIGINT meanwhile: reported, then the process dies of it
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/task_interrupt.h"
#include "common/status.h"

namespace mirrored {

inline constexpr auto kInterruptReportWait = std::chrono::seconds(2);

class InterruptReport {
 public:
  // Installs the SIGINT handler, unless SIGINT is ignored (nohup); `report`
  // runs on a thread of this class with Cancelled(kInterruptedOnItsHost).
  // One instance at a time.
  explicit InterruptReport(std::function<void(const Status&)> report);
  // Restores SIGINT's earlier action.
  ~InterruptReport();

  InterruptReport(const InterruptReport&) = delete;
  InterruptReport& operator=(const InterruptReport&) = delete;

 private:
  void Watch();

  std::function<void(const Status&)> report_;
  bool installed_ = false;
  struct sigaction previous_ {};
  std::thread thread_;
};

}  // namespace mirrored
