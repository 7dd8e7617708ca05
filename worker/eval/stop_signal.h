// SIGINT and SIGTERM as a request for the evaluator to stop between
// checkpoints (rather than die in the middle of one): the handler writes the
// signal number to a pipe, and the evaluator's wait between polls returns
// early on it. The evaluator then pauses its lease (EvaluatorLease::Pause:
// the chief goes on keeping the checkpoints it has not evaluated, for the
// evaluator started again) and exits 128 + the signal.
//
//   StopSignal::Install();
//   if (std::optional<int> sig = StopSignal::WaitFor(poll_interval)) ...   // woken by a signal
#pragma once

#include <chrono>
#include <optional>

namespace mirrored {

class StopSignal {
 public:
  // Installs the handlers (async-signal-safe: a write to a non-blocking pipe).
  static void Install();
  // Waits up to `timeout`; the signal that arrived (now or earlier), if any.
  static std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  // The signal that arrived, if any, without waiting.
  static std::optional<int> Received() { return WaitFor(std::chrono::milliseconds(0)); }
};

}  // namespace mirrored
