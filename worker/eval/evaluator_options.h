// What the side-car evaluator (evaluator.h) is told: the job's run
// directory, the data whose test split it scores, its device, and when to
// look and when to stop. mirrored-worker fills it in from its flags in one
// place (worker/role_options.h). Each field says the flag it stands for:
// messages name the flags.
//
//   EvaluatorOptions o{.run_dir = "runs/demo", .data_dir = "data/fashion-mnist"};
//   o.poll_interval = std::chrono::milliseconds(50);
//   MIRRORED_ASSIGN_OR_RETURN(EvaluationSummary s, RunEvaluator(o));
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "worker/data/data_options.h"

namespace mirrored {

struct EvaluatorOptions {
  std::string run_dir;                                         // --run-dir: the job's
  std::string data_dir = "/usr/share/datasets/fashion-mnist";  // --data: its test split is scored
  data::DataOptions data_options;                              // how --data is read (float targets: --loss mse)
  std::string device = "auto";                                 // --device: auto | cpu | gpu
  // --model when given on the command line: each checkpoint's own model is
  // evaluated, and one that differs is warned about once.
  std::optional<std::string> model;
  // Seconds as the flags give them (messages print them so).
  std::chrono::duration<double> poll_interval{1};  // --poll-interval: between checkpoint scans
  std::chrono::duration<double> eval_timeout{0};   // --eval-timeout: with no new checkpoint; 0: never
  int64_t max_evaluations = 0;                     // --max-evaluations; 0: until the final checkpoint
};

}  // namespace mirrored
