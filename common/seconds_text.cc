#include "common/seconds_text.h"

#include <cstdio>

namespace mirrored {

std::string SecondsText(std::chrono::duration<double> d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", d.count());
  return buf;
}

}  // namespace mirrored
