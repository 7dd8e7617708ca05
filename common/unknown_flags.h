// The command-line flags a CLI11 app does not take, for a message that names
// them (CLI11's own lists every argument from the first unknown one on,
// values included).
//
//   if (std::string unknown = UnknownFlags(app, 1, argc, argv); !unknown.empty()) ...   // "--modle, --x"
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace mirrored {

// The flags among argv[first..argc) (up to a "--") that `app` does not take,
// as "--a, --b" ("" if none). "--name=value" counts as --name.
inline std::string UnknownFlags(const CLI::App& app, int first, int argc, char** argv) {
  std::string unknown;
  for (int i = first; i < argc && std::string(argv[i]) != "--"; ++i) {
    const std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-') continue;  // a value
    const std::string name = a.substr(0, a.find('='));
    if (name == "-h" || name == "--help" || app.get_option_no_throw(name) != nullptr) continue;
    unknown += (unknown.empty() ? "" : ", ") + name;
  }
  return unknown;
}

}  // namespace mirrored
