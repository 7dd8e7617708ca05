// The error a training task reports to its job's coordination service when
// a SIGINT on its host ends it (worker/train/interrupt_report.h); the
// launcher finds it in a peer's last lines (BlamedBy) and does not restart
// the job for it:
//
//   ReportError(CancelledError(std::string(kInterruptedOnItsHost)));
#pragma once

#include <string_view>

namespace mirrored {

inline constexpr std::string_view kInterruptedOnItsHost = "interrupted on its host (SIGINT: a Ctrl-C)";

}  // namespace mirrored
