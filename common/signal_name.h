// A signal in messages, by its name and its number, the same way in the
// launcher and the worker:
//
//   SignalName(SIGTERM) == "SIGTERM (15)"
//   SignalName(64)      == "signal 64"          // no name of its own (a real-time signal)
#pragma once

#include <string>
#include <string_view>

namespace mirrored {

std::string SignalName(int sig);

// The error a training task reports to the job's service when a SIGINT ends
// it (worker/train/interrupt_report.h); the launcher finds it in a peer's
// last lines (BlamedBy) and does not restart the job for it.
inline constexpr std::string_view kInterruptedOnItsHost = "interrupted on its host (SIGINT: a Ctrl-C)";

}  // namespace mirrored
