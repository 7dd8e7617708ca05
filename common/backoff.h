// The pause before the next try of something that keeps failing: `first`,
// doubled after each failure, never longer than `longest`. One rule for the
// launcher's restarts (the job's, an evaluator's) and a task's registration
// retries.
//
//   constexpr Backoff kRestartBackoff{std::chrono::seconds(1), std::chrono::seconds(30)};
//   kRestartBackoff.Pause(0) == 1 s;  Pause(3) == 8 s;  Pause(10) == 30 s
#pragma once

#include <algorithm>
#include <chrono>

namespace mirrored {

struct Backoff {
  std::chrono::milliseconds first;
  std::chrono::milliseconds longest;

  // The pause after `failures` failures before this one (0: `first`);
  // never overflows, however many.
  constexpr std::chrono::milliseconds Pause(int failures) const {
    std::chrono::milliseconds pause = first;
    for (int i = 0; i < failures && pause < longest && pause.count() > 0; ++i) pause *= 2;
    return std::min(pause, longest);
  }
};

}  // namespace mirrored
