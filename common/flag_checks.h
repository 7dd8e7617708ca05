// CLI11 checks shared by mirrored-launch and mirrored-worker.
//
//   app.add_option("--run-dir", run_dir)->check(NonEmptyPath("--run-dir", "leave the flag out for a fresh one"));
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace mirrored {

// Refuses an explicitly empty value (`--run-dir ""`, `--run-dir "$UNSET"`),
// which would otherwise read as the flag left out. `hint` ends the message.
inline CLI::Validator NonEmptyPath(const std::string& flag, const std::string& hint) {
  return CLI::Validator(
      [flag, hint](std::string& value) -> std::string {
        return value.empty() ? flag + " is empty (an unset variable?): " + hint : std::string();
      },
      "PATH", "non-empty");
}

}  // namespace mirrored
