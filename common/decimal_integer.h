// A CLI11 transform for integer flags that takes only what it says: CLI11
// 2.1.2 converts with strtoull/strtoll, so "-1" becomes 2^64 - 1 for an
// unsigned flag, a number past a 64-bit type's range becomes its largest
// value, and "010" is octal 8, all silently. DecimalInteger takes decimal
// digits (a sign allowed) within [min, max] and hands CLI11 the number's
// plain decimal form; anything else is a ValidationError ("--seed: -1 is
// out of range: 0 to 9223372036854775807", "--workers: \"1.5\" is not an integer").
//
//   app.add_option("--epochs", epochs)->transform(DecimalInteger<int64_t>());
//   app.add_option("--seed", seed)->transform(DecimalInteger<uint64_t>(0, INT64_MAX));
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace mirrored {

template <typename T>
CLI::Validator DecimalInteger(T min = std::numeric_limits<T>::min(), T max = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) <= sizeof(uint64_t));
  // No description: --help shows the flag's type as before.
  return CLI::Validator(
      [min, max](std::string& value) -> std::string {
        std::string_view s = value;
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
        const bool negative = !s.empty() && s.front() == '-';
        if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
        if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) {
          return "\"" + value + "\" is not an integer";
        }
        const std::string out_of_range = value + " is out of range: " + std::to_string(min) + " to " + std::to_string(max);
        uint64_t magnitude = 0;
        if (std::from_chars(s.data(), s.data() + s.size(), magnitude).ec != std::errc()) return out_of_range;
        T parsed{};
        if (negative && magnitude != 0) {
          if constexpr (std::is_unsigned_v<T>) {
            return out_of_range;
          } else {
            // -magnitude >= T's lowest exactly when magnitude - 1 <= T's highest.
            if (magnitude - 1 > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range;
            parsed = static_cast<T>(-static_cast<T>(magnitude - 1) - 1);
          }
        } else {
          if (magnitude > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range;
          parsed = static_cast<T>(magnitude);
        }
        if (parsed < min || parsed > max) return out_of_range;
        value = std::to_string(parsed);
        return std::string();
      },
      "", "");
}

}  // namespace mirrored
