// Durations in messages, in seconds as a user types them in flags:
//
//   SecondsText(std::chrono::milliseconds(2500)) == "2.5 s"
//   SecondsText(std::chrono::minutes(5))         == "300 s"
#pragma once

#include <chrono>
#include <string>

namespace mirrored {

// Whole seconds in full ("1234567 s"), fractions to 6 significant digits
// ("0.25 s").
std::string SecondsText(std::chrono::duration<double> d);

}  // namespace mirrored
