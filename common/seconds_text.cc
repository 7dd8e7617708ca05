#include "common/seconds_text.h"

#include <cmath>
#include <cstdio>

namespace mirrored {

std::string SecondsText(std::chrono::duration<double> d) {
  char buf[64];
  const double s = d.count();
  // Whole seconds in full ("86400 s", not "%g"'s "86400" turning into
  // "1.2e+06" beyond six digits); fractions to six significant digits.
  if (std::abs(s) < 1e15 && s == std::floor(s)) {
    std::snprintf(buf, sizeof(buf), "%.0f s", s);
  } else {
    std::snprintf(buf, sizeof(buf), "%g s", s);
  }
  return buf;
}

}  // namespace mirrored
