// `mirrored-launch local`: a whole job on this host. Reserves loopback ports
// without races, writes each task's TF_CONFIG, starts one mirrored-worker per
// worker (and the evaluator), or the user's own program after `--`,
// supervises them and restarts the job from the latest checkpoint while
// --max-restarts allows.
//
//   LocalCommand local;
//   local.Register(app);
//   if (local.parsed()) return local.Run(std::cout, std::cerr);
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/job/local_job_plan.h"
#include "launcher/supervised_run.h"

namespace mirrored {

class LocalCommand {
 public:
  void Register(CLI::App& app);
  bool parsed() const { return subcommand_ != nullptr && subcommand_->parsed(); }
  // Returns the launcher's exit code (DESIGN.md).
  int Run(std::ostream& out, std::ostream& err);

 private:
  // The flags' values in range: InvalidArgument naming the flag.
  Status CheckFlags() const;
  // What the tasks run (the program after `--`, --evaluator-command) with
  // the other flags, as the job plan takes them.
  StatusOr<LocalJobOptions> OptionsFromFlags() const;
  // Claims the run directory and runs the planned job generation after
  // generation: the exit code.
  int RunJob(const LocalJobPlan& plan, const std::string& run_dir, const std::vector<std::string>& env,
             std::ostream& err);

  CLI::App* subcommand_ = nullptr;
  int workers_ = 1;
  int gpus_per_worker_ = 0;   // unless given: the visible GPUs split evenly
  CLI::Option* gpus_per_worker_option_ = nullptr;
  int cpu_replicas_ = 0;      // unless given: the worker's default
  CLI::Option* cpu_replicas_option_ = nullptr;
  bool evaluator_ = false;
  int evaluator_gpus_ = 0;    // only with --evaluator; unless given: none
  CLI::Option* evaluator_gpus_option_ = nullptr;
  std::string run_dir_;
  int max_restarts_ = 0;
  double grace_period_sec_ = kDefaultGracePeriodSec;
  bool dry_run_ = false;
  bool no_tls_ = false;       // --no-tls: the coordination service in plaintext
  double hang_timeout_sec_ = 0;  // --hang-timeout: 0 is off
  std::string evaluator_command_;  // --evaluator-command: "" runs the program after `--`
  std::string worker_binary_;
  std::vector<std::string> worker_args_;  // after `--`: the program and its arguments, or mirrored-worker's flags
};

}  // namespace mirrored
