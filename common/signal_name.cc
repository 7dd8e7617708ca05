#include "common/signal_name.h"

#include <string.h>

namespace mirrored {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return std::string("SIG") + abbrev + " (" + std::to_string(sig) + ")";
}

}  // namespace mirrored
