// mirrored-worker: one task of a job. Its role comes from TF_CONFIG's
// task.type: chief and worker train, evaluator evaluates; no TF_CONFIG means
// a single local task training alone (one replica per visible GPU, else
// --cpu-replicas CPU replicas).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <optional>

#include "common/cluster/tf_config_parser.h"
#include "common/launcher_environment.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/unknown_flags.h"
#include "mirrored/config.h"
#include "worker/data/training_data.h"
#include "worker/eval/evaluator.h"
#include "worker/eval/stop_signal.h"
#include "worker/export/keras_export.h"
#include "worker/model/model_choice.h"
#include "worker/role_options.h"
#include "worker/strategy/mirrored_strategy.h"
#include "worker/train/diverged_error.h"
#include "worker/train/interrupt_report.h"
#include "worker/train/preemption.h"
#include "worker/train/trainer.h"
#include "worker/worker_options.h"

namespace mirrored {
namespace {

int Fail(const std::string& task, const Status& s) {
  // One write, so that no other thread's log line lands inside it.
  const std::string line = "mirrored-worker: " + task + ": error: " + s.message() + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
  return ExitCodeFor(s);
}

// A training task of a cluster whose flags are refused never joins: tell the
// chief's service, so the other tasks stop now, naming this error, instead
// of waiting for it until their registration timeout (and, restarted by
// their launchers, again). Not for --check-flags (a dry run).
int FailBeforeJoining(const Status& error) {
  if (auto config = ResolveTfConfig(std::nullopt); config.ok()) {
    MirroredStrategy::ReportFailureBeforeJoining(*config, StrategyOptions::FromEnvironment(), error);
  }
  return ExitCodeFor(error);
}

// A training task's --data, headers only, and whether --model (or
// --model-json) can take its images: milliseconds, before the task joins
// a job.
Status CheckTrainingData(const WorkerOptions& options) {
  MIRRORED_ASSIGN_OR_RETURN(data::ImageSetShape shape,
                            data::TrainingData::CheckFiles(options.data_dir, options.validate, options.data_options()));
  // The class count needs the labels read (0 here for NumPy data): Trainer checks it.
  MIRRORED_ASSIGN_OR_RETURN(model::ModelChoice choice, model::ModelChoice::FromFlags(options.model, options.model_json));
  return choice.CheckInput({shape.height, shape.width, shape.channels},
                           choice.is_keras() ? shape.classes : std::max(shape.classes, 1));
}

// --check-flags (mirrored-launch --dry-run): after the flags, what the task
// would check first when it starts, in a millisecond, joining nothing and
// writing nothing: its TF_CONFIG and the data files it reads (a training
// task the training split, and the test split with --validate; the
// evaluator the test split). Returns the exit code, 2 naming what is wrong.
int CheckWithoutRunning(const WorkerOptions& options) {
  auto config = ResolveTfConfig(std::nullopt);
  Status s = config.status();
  if (s.ok()) s = config->IsEvaluator() ? data::TrainingData::CheckTestFiles(options.data_dir, options.data_options())
                                              .status()
                                        : CheckTrainingData(options);
  if (s.ok()) return kExitSuccess;
  std::cerr << "mirrored-worker: error: " << s.message() << "\n";
  return ExitCodeFor(s);
}

// --export CKPT_DIR: the checkpoint's weights for Keras, no job joined.
int RunExport(const WorkerOptions& options) {
  auto exported = ExportCheckpoint(FileEnv::Default(), options.export_checkpoint, options.export_dir);
  if (!exported.ok()) return Fail("export", exported.status());
  std::printf("exported step %lld for Keras: %s, %s\n", static_cast<long long>(exported->step),
              exported->json_path.c_str(), exported->weights_path.c_str());
  return kExitSuccess;
}

// The evaluator's run: SIGINT/SIGTERM stop it between checkpoints.
int RunEvaluatorTask(const WorkerOptions& options, const std::string& task) {
  StopSignal::Install();  // SIGINT/SIGTERM: stop between checkpoints, pause the lease
  auto evaluated = RunEvaluator(EvaluatorOptionsFrom(options));
  if (!evaluated.ok()) return Fail(task, evaluated.status());
  std::printf("%s\n", evaluated->LastLine().c_str());
  if (evaluated->stop_signal) return 128 + *evaluated->stop_signal;
  return kExitSuccess;
}

// Fails before joining, telling the other tasks (the chief's service) so
// that they stop too. The error is said first: the report may wait (the
// chief serves it to the other tasks for up to 10 s).
int FailAndTell(const std::string& task, const ClusterConfig& config, const StrategyOptions& so,
                const Status& error) {
  const int code = Fail(task, error);
  MirroredStrategy::ReportFailureBeforeJoining(config, so, error);
  return code;
}

// What a finished training task prints: its steps and weights fingerprint,
// and on the chief the last epoch's figures. Returns the exit code.
int ReportDone(const std::string& task, const TrainSummary& summary, bool chief) {
  if (summary.preempted) {
    std::printf("preempted (SIGTERM %s): stopped after step %lld; a restarted job resumes there\n",
                summary.preempted_tasks.c_str(), static_cast<long long>(summary.steps));
    return kExitPreempted;
  }
  char fingerprint[16];
  std::snprintf(fingerprint, sizeof(fingerprint), "%06x", summary.weights_fingerprint);
  if (summary.nothing_to_train) {
    std::cout << "done: " << summary.steps << (summary.steps == 1 ? " step" : " steps")
              << " (nothing left to train); weights fingerprint " << fingerprint
              << std::endl;
  } else if (chief) {
    const std::string& metric = summary.metric;
    std::cout << "done: " << summary.steps << (summary.steps == 1 ? " step" : " steps") << "; loss " << summary.loss
              << " " << metric << " " << summary.accuracy;
    if (summary.val_accuracy >= 0) {
      std::cout << "; val_loss " << summary.val_loss << " val_" << metric << " " << summary.val_accuracy;
    }
    std::cout << "; replicas identical: " << (summary.replicas_identical ? "yes" : "NO") << "; weights fingerprint "
              << fingerprint << std::endl;
  } else {
    std::cout << "done: " << summary.steps << (summary.steps == 1 ? " step" : " steps") << "; weights fingerprint "
              << fingerprint << std::endl;
  }
  return summary.replicas_identical ? kExitSuccess : Fail(task, InternalError("replicas diverged"));
}

// Trains on a formed job, then leaves it (the exit barrier) and reports.
int TrainAndReport(const WorkerOptions& options, const ClusterConfig& config, const std::string& task,
                   MirroredStrategy& strategy, const data::TrainingData& data) {
  // A Ctrl-C on this task's host alone ends it as SIGINT does, but tells the
  // others why first: they stop naming it, and their launchers do not
  // restart the job. Under `local` every task gets the Ctrl-C at once.
  std::optional<InterruptReport> interrupts;
  if (!config.is_single_local_task && !LauncherSignalsTheWholeJob()) {
    interrupts.emplace([&strategy](const Status& s) { strategy.TellFailureBeforeEnding(s); });
  }
  auto summary = Train(TrainerOptionsFrom(options), strategy, data);
  if (!summary.ok()) {
    // Tell the others at once (they exit 3 instead of waiting); an Aborted
    // error came from a peer and needs no report. Nor does a divergence
    // another task sees: the chief reaches it too, and says it with its
    // latest checkpoint, unless this report aborts it first (exit 3).
    const Status& error = summary.status();
    const bool chief_says_it = IsDivergedError(error) && !strategy.is_chief_task();
    if (error.code() != StatusCode::kAborted && !chief_says_it) strategy.ReportError(error);
    return Fail(task, summary.status());
  }
  if (Status s = strategy.Shutdown(); !s.ok()) return Fail(task, s);
  return ReportDone(task, *summary, strategy.is_chief_task());
}

// A chief or worker: checks what it can alone, joins the job while the
// dataset loads, trains.
int RunTrainingTask(const WorkerOptions& options, const ClusterConfig& config, const std::string& task) {
  StrategyOptions so = StrategyOptions::FromEnvironment();  // job token, restarted
  so.tls = options.tls;  // the --tls-* flags, else MIRRORED_TLS_*
  so.stop_waiting = [] { return Preemption::Requested(); };  // the launcher's SIGTERM
  auto device = ParseDeviceKind(options.device);
  if (!device.ok()) return FailAndTell(task, config, so, device.status());
  SetStrategyFlags(options, *device, so);
  // A wrong --data fails now, before joining (and says so to the chief's
  // service), not once every task has registered.
  if (Status files = CheckTrainingData(options); !files.ok()) {
    return FailAndTell(task, config, so, files);
  }
  Preemption::Install();  // SIGTERM: stop at the next agreed step, checkpoint, exit 143
  // The dataset loads while the job forms (registration, Gloo rendezvous):
  // the two are independent and each takes a good part of the start-up.
  auto loading = std::async(std::launch::async, [&options] {
    return data::TrainingData::Load(options.data_dir, options.validate, options.data_options());
  });
  JoinAttempt attempt;
  auto strategy = MirroredStrategy::Create(config, so, &attempt);
  auto data = loading.get();
  if (!strategy.ok() && Preemption::Requested()) {
    // SIGTERM before the job formed: nothing to checkpoint, stop now.
    std::fprintf(stderr, "mirrored-worker: %s: stopped by SIGTERM before the job formed (%s)\n", task.c_str(),
                 strategy.status().message().c_str());
    return 128 + SIGTERM;
  }
  if (!strategy.ok()) {
    // A configuration error: the others must not wait for this task (no
    // usable device), nor, when the chief's own service found the error
    // (tasks started with other clusters), for a chief gone.
    const int code = Fail(task, strategy.status());
    if (code == kExitUsage) attempt.ReportFailure(config, so, strategy.status());
    return code;
  }
  if (!data.ok()) {
    // The others must not wait for this task: they exit 3 naming it.
    (*strategy)->ReportError(data.status());
    return Fail(task, data.status());
  }
  return TrainAndReport(options, config, task, **strategy, *data);
}

int RunWorker(const WorkerOptions& options) {
  auto config = ResolveTfConfig(std::nullopt);
  if (!config.ok()) return Fail("worker", config.status());
  for (const auto& w : config->warnings) MIRRORED_LOG(WARNING) << w;
  const std::string task = config->task.ToString();
  // Under mirrored-launch (which sets MIRRORED_GENERATION) every line is
  // already prefixed with the task's name and teed to logs/<task>.log; a tag
  // of our own would print the name twice.
  if (!LauncherGeneration()) SetLogTag(task);
  // The launcher always gives one; a chief started by hand without one
  // would train and keep nothing, silently.
  if (config->IsChief() && options.run_dir.empty() && !LauncherGeneration()) {
    MIRRORED_LOG(WARNING) << "no --run-dir: this run saves nothing (no checkpoint, no metrics.jsonl, no TensorBoard "
                             "logs); pass --run-dir DIR to keep them";
  }
  if (config->IsEvaluator()) return RunEvaluatorTask(options, task);
  return RunTrainingTask(options, *config, task);
}

}  // namespace
}  // namespace mirrored

int main(int argc, char** argv) {
  CLI::App app{"mirrored-worker: one task of a synchronous data-parallel training job"};
  app.set_version_flag("--version", std::string("mirrored-worker ") + mirrored::kVersion +
                                        (mirrored::kWithCuda ? " (CUDA)" : " (CPU only)"));
  mirrored::WorkerOptions options;
  options.Register(app);
  // For mirrored-launch --dry-run: validate the flags (and what they name),
  // run nothing.
  bool check_flags = false;
  app.add_flag("--check-flags", check_flags,
               "Only check the flags, TF_CONFIG and the data files (exit 0, or 2 naming what is wrong)")
      ->group("");
  const bool dry_run = std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string(a) == "--check-flags"; });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line naming the flags it does not take (CLI11's lists every
    // argument from the first one on, values included).
    const std::string unknown = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr
                                    ? mirrored::UnknownFlags(app, 1, argc, argv)
                                    : std::string();
    const std::string message = unknown.empty() ? std::string(e.what())
                                                : unknown + (unknown.find(',') == std::string::npos ? " is not a flag"
                                                                                                    : " are not flags") +
                                                      " of mirrored-worker";
    std::cerr << "mirrored-worker: error: " << message << " (mirrored-worker --help)\n";
    if (dry_run) return mirrored::kExitUsage;
    return mirrored::FailBeforeJoining(mirrored::InvalidArgumentError(message));
  }
  if (mirrored::Status s = options.Validate(); !s.ok()) {
    std::cerr << "mirrored-worker: error: " << s.message() << "\n";
    if (check_flags) return mirrored::kExitUsage;
    return mirrored::FailBeforeJoining(s);
  }
  if (check_flags) return mirrored::CheckWithoutRunning(options);
  if (!options.export_checkpoint.empty()) return mirrored::RunExport(options);
  return mirrored::RunWorker(options);
}
