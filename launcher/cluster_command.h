// `mirrored-launch cluster`: this host's task of a multi-host job. The
// cluster comes from TF_CONFIG (environment), --tf-config FILE|JSON,
// --from-slurm or --from-k8s-indexed-job; every host runs the same command
// and the job forms through the chief's coordination service. Supervision,
// log prefixes, failure reports and restarts are those of `local`.
//
//   ClusterCommand cluster;
//   cluster.Register(app);
//   if (cluster.parsed()) return cluster.Run(ProcessEnvironment(), std::cout, std::cerr);
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "common/cluster/cluster_config.h"
#include "common/cluster/cluster_source.h"
#include "common/cluster/environment_map.h"
#include "common/status.h"
#include "launcher/job/task_program.h"
#include "launcher/process/job_supervisor.h"
#include "launcher/supervised_run.h"

namespace mirrored {

class ClusterCommand {
 public:
  void Register(CLI::App& app);
  bool parsed() const { return subcommand_ != nullptr && subcommand_->parsed(); }
  int Run(const EnvironmentMap& env, std::ostream& out, std::ostream& err);

  // The task this host runs for generation `generation` (exposed for tests).
  // `resolved`, when given, receives the cluster and task it was planned from.
  StatusOr<TaskLaunch> PlanTask(const EnvironmentMap& env, int generation, ClusterConfig* resolved = nullptr) const;

 private:
  // Runs the planned task generation after generation, once the run
  // directory is made and (by the chief) claimed: the exit code.
  int RunTask(const ClusterConfig& config, const TaskLaunch& first, const EnvironmentMap& env, std::ostream& err);

  // What this host's task runs: the program after `--` (or mirrored-worker),
  // or for an evaluator --evaluator-command when given.
  StatusOr<TaskProgram> ProgramFor(const ClusterConfig& config, const EnvironmentMap& env) const;

  CLI::App* subcommand_ = nullptr;
  ClusterSource source_;
  std::string tf_config_text_;
  CLI::Option* tf_config_option_ = nullptr;
  std::string run_dir_;
  std::string resolved_run_dir_;  // --run-dir, or the default made once per launch (every generation's)
  int max_restarts_ = 0;
  double grace_period_sec_ = kDefaultGracePeriodSec;
  bool dry_run_ = false;
  bool insecure_ = false;  // --insecure: no token nor client certificates off loopback
  double hang_timeout_sec_ = 0;    // --hang-timeout: 0 is off
  std::string evaluator_command_;  // --evaluator-command: what an evaluator task runs instead
  std::string worker_binary_;
  std::vector<std::string> worker_args_;  // after `--`: the program and its arguments, or mirrored-worker's flags
};

}  // namespace mirrored
