// `mirrored-launch explain`: resolves the cluster the way `cluster` would
// (TF_CONFIG, --tf-config FILE|JSON, --from-slurm or --from-k8s-indexed-job)
// and prints every task, its address and role, the coordination-service host
// and this process's task, as a table or (--json) as JSON. Nothing is started.
//
//   ExplainCommand explain;
//   explain.Register(app);                        // adds the subcommand to CLI11
//   if (explain.parsed()) return explain.Run(ProcessEnvironment(), std::cout, std::cerr);
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>

#include "common/cluster/cluster_config.h"
#include "common/cluster/cluster_source.h"
#include "common/cluster/environment_map.h"
#include "common/status.h"

namespace mirrored {

class ExplainCommand {
 public:
  struct Options {
    ClusterSource source;  // --tf-config, --from-slurm (--slurm-port-base), --from-k8s-indexed-job
    bool json = false;     // --json
  };

  // Adds `explain` and its flags to `app`; the options live in this object,
  // which must outlive the parse.
  void Register(CLI::App& app);
  // True once CLI11 has parsed an `explain` command line.
  bool parsed() const { return subcommand_ != nullptr && subcommand_->parsed(); }
  const Options& options() const { return options_; }

  // Resolves and prints. Returns the process exit code: 0, or 2 with
  // "mirrored-launch: error: <message>" on `err` for a bad configuration.
  int Run(const EnvironmentMap& env, std::ostream& out, std::ostream& err) const;

  static std::string FormatTable(const ClusterConfig& config);
  static std::string FormatJson(const ClusterConfig& config);

 private:
  Options options_;
  std::string tf_config_text_;
  CLI::App* subcommand_ = nullptr;
  CLI::Option* tf_config_option_ = nullptr;
};

}  // namespace mirrored
