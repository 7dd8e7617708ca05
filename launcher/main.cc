// mirrored-launch: starts and supervises the tasks of a job. Each subcommand
// lives in its own file pair (explain_command.h, ...) and is registered here.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "common/cluster/environment_map.h"
#include "common/status.h"
#include "common/unknown_flags.h"
#include "launcher/cluster_command.h"
#include "launcher/explain_command.h"
#include "launcher/local_command.h"
#include "mirrored/config.h"


int main(int argc, char** argv) {
  CLI::App app{"mirrored-launch: start and supervise a synchronous data-parallel training job"};
  app.set_version_flag("--version", std::string("mirrored-launch ") + mirrored::kVersion);
  app.require_subcommand(1);
  // A flag given twice takes its last value (as argparse does); the
  // subcommands inherit this.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  mirrored::LocalCommand local;
  local.Register(app);
  mirrored::ClusterCommand cluster;
  cluster.Register(app);
  mirrored::ExplainCommand explain;
  explain.Register(app);
  // --version anywhere before `--` (`mirrored-launch local --version` too).
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    if (std::string(argv[i]) == "--version") {
      std::cout << "mirrored-launch " << mirrored::kVersion << "\n";
      return mirrored::kExitSuccess;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::string first = argc > 1 ? argv[1] : "";
    // A flag the subcommand does not take, before `--`: name it (CLI11 would
    // list every argument from there on as "not expected", the workers' own
    // after `--` included).
    CLI::App* sub = nullptr;
    try {
      if (!first.empty() && first[0] != '-') sub = app.get_subcommand(first);
    } catch (const CLI::Error&) {  // not a subcommand
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && sub != nullptr) {
      if (std::string unknown = mirrored::UnknownFlags(*sub, 2, argc, argv); !unknown.empty()) {
        std::cerr << "mirrored-launch " << first << ": error: " << unknown << " is not a flag of `" << first
                  << "` (`mirrored-launch " << first << " --help` lists them; the workers' own flags go after `--`)\n";
        return mirrored::kExitUsage;
      }
    }
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    if (argc > 1 && first[0] != '-' && sub == nullptr) {
      std::cerr << "mirrored-launch: unknown subcommand \"" << first << "\": use local, cluster or explain\n";
      return mirrored::kExitUsage;
    }
    // One line, named as the others are (`--workers: "abc" is not an integer`).
    const std::string command = sub != nullptr ? "mirrored-launch " + first : std::string("mirrored-launch");
    std::cerr << command << ": error: " << e.what() << " (" << command << " --help)\n";
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      std::cerr << "mirrored-launch: the workers' own flags go after `--`, e.g. mirrored-launch local --workers 2 "
                   "-- --model cnn --epochs 3\n";
    }
    return mirrored::kExitUsage;
  }
  if (local.parsed()) return local.Run(std::cout, std::cerr);
  if (cluster.parsed()) return cluster.Run(mirrored::ProcessEnvironment(), std::cout, std::cerr);
  if (explain.parsed()) {
    return explain.Run(mirrored::ProcessEnvironment(), std::cout, std::cerr);
  }
  return mirrored::kExitSuccess;
}
