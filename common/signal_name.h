// A signal in messages, by its name and its number, the same way in the
// launcher and the worker:
//
//   SignalName(SIGTERM) == "SIGTERM (15)"
//   SignalName(64)      == "signal 64"          // no name of its own (a real-time signal)
#pragma once

#include <string>

namespace mirrored {

std::string SignalName(int sig);

}  // namespace mirrored
