// mirrored-launch: starts and supervises the tasks of a job. Each subcommand
// lives in its own file pair (explain_command.h, ...) and is registered here.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "common/cluster/environment_map.h"
#include "common/status.h"
#include "common/unknown_flags.h"
#include "launcher/certs_command.h"
#include "launcher/cluster_command.h"
#include "launcher/explain_command.h"
#include "launcher/local_command.h"
#include "mirrored/config.h"

namespace {

// What a torchrun user's flag is called here, for the error that names it
// ("" when `flags`, as UnknownFlags lists them, hold none of torchrun's).
std::string TorchrunHint(const std::string& subcommand, const std::string& flags) {
  auto has = [&flags](std::initializer_list<const char*> names) {
    for (const char* name : names) {
      for (size_t at = flags.find(name); at != std::string::npos; at = flags.find(name, at + 1)) {
        const size_t end = at + std::string(name).size();
        if ((at == 0 || flags[at - 1] == ' ') && (end == flags.size() || flags[end] == ',')) return true;
      }
    }
    return false;
  };
  const bool per_node = has({"--nproc_per_node", "--nproc-per-node", "--nproc"});
  const bool multi_node = has({"--nnodes", "--node_rank", "--node-rank", "--master_addr", "--master-addr",
                               "--master_port", "--master-port", "--rdzv_endpoint", "--rdzv-endpoint"});
  if (per_node && subcommand == "local") return "torchrun's --nproc_per_node is --workers here";
  if (per_node && subcommand == "cluster") {
    return "torchrun's --nproc_per_node has no counterpart in `cluster`, which runs the one task TF_CONFIG gives "
           "this host (with its visible GPUs); `mirrored-launch local --workers N` runs N on one host";
  }
  if (multi_node && subcommand == "local") {
    return "a job over several hosts is `mirrored-launch cluster` on each of them: torchrun's --nnodes, "
           "--node_rank and --master_addr are the cluster and task of its TF_CONFIG (or --from-slurm)";
  }
  if (multi_node) {
    return "torchrun's --nnodes, --node_rank and --master_addr are the cluster and task of TF_CONFIG here "
           "(--tf-config, --from-slurm or --from-k8s-indexed-job)";
  }
  return "";
}

}  // namespace


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
  mirrored::CertsCommand certs;
  certs.Register(app);
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
        const std::string hint = TorchrunHint(first, unknown);
        std::cerr << "mirrored-launch " << first << ": error: " << unknown
                  << (unknown.find(',') == std::string::npos ? " is not a flag of `" : " are not flags of `") << first
                  << "`" << (hint.empty() ? "" : ": " + hint) << " (`mirrored-launch " << first
                  << " --help` lists them" << (first == "explain" || first == "certs" ? "" : "; the workers' own flags go after `--`")
                  << ")\n";
        return mirrored::kExitUsage;
      }
    }
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    if (argc > 1 && first[0] != '-' && sub == nullptr) {
      std::cerr << "mirrored-launch: unknown subcommand \"" << first << "\": use local, cluster, explain or certs\n";
      return mirrored::kExitUsage;
    }
    // One line, named as the others are (`--workers: "abc" is not an integer`).
    const std::string command = sub != nullptr ? "mirrored-launch " + first : std::string("mirrored-launch");
    std::cerr << command << ": error: " << e.what() << " (" << command << " --help)\n";
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && first != "explain" && first != "certs") {  // these run no worker
      std::cerr << "mirrored-launch: the workers' own flags go after `--`, e.g. mirrored-launch local --workers 2 "
                   "-- --model cnn --epochs 3\n";
    }
    return mirrored::kExitUsage;
  }
  if (local.parsed()) return local.Run(std::cout, std::cerr);
  if (cluster.parsed()) return cluster.Run(mirrored::ProcessEnvironment(), std::cout, std::cerr);
  if (certs.parsed()) return certs.Run(std::cout, std::cerr);
  if (explain.parsed()) {
    return explain.Run(mirrored::ProcessEnvironment(), std::cout, std::cerr);
  }
  return mirrored::kExitSuccess;
}
