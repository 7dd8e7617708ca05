// mirrored-launch: starts and supervises the tasks of a job. Each subcommand
// lives in its own file pair (explain_command.h, ...) and is registered here.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "common/cluster/environment_map.h"
#include "common/status.h"
#include "launcher/cluster_command.h"
#include "launcher/explain_command.h"
#include "launcher/local_command.h"
#include "mirrored/config.h"

int main(int argc, char** argv) {
  CLI::App app{"mirrored-launch: start and supervise a synchronous data-parallel training job"};
  app.set_version_flag("--version", std::string("mirrored-launch ") + mirrored::kVersion);
  app.require_subcommand(1);
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
    int rc = app.exit(e);
    if (rc == 0) return 0;
    const std::string first = argc > 1 ? argv[1] : "";
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      std::cerr << "mirrored-launch: the workers' own flags go after `--`, e.g. mirrored-launch local --workers 2 "
                   "-- --model cnn --epochs 3\n";
    } else if (argc > 1 && first[0] != '-' && first != "local" && first != "cluster" && first != "explain") {
      std::cerr << "mirrored-launch: unknown subcommand \"" << first << "\": use local, cluster or explain\n";
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
