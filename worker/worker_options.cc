#include "worker/worker_options.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>

#include "common/decimal_integer.h"
#include "common/flag_checks.h"
#include "common/launcher_environment.h"
#include "worker/coordination/tls_credentials.h"
#include "worker/comm/wire_type.h"
#include "worker/model/precision.h"

namespace mirrored {
namespace {

Status Positive(const char* flag, double value) {
  if (value > 0 && std::isfinite(value)) return OkStatus();
  return InvalidArgumentError(std::string(flag) + " " + CLI::detail::to_string(value) +
                              " must be a positive number");
}

// A duration in seconds that a std::chrono count of milliseconds (or
// nanoseconds in a condition variable's wait) holds: 1e300 would overflow.
Status Seconds(const char* flag, double value, bool zero_allowed = false) {
  if (zero_allowed && value == 0) return OkStatus();
  if (!(value > 0) || !(value <= kMaxFlagSeconds)) {
    return InvalidArgumentError(std::string(flag) + " " + CLI::detail::to_string(value) + " must be a number of seconds above 0" +
                                (zero_allowed ? " (or 0 for no limit)" : "") + " and at most " +
                                CLI::detail::to_string(kMaxFlagSeconds) + " (about 30 years)");
  }
  return OkStatus();
}

// Each flag defaults to its MIRRORED_TLS_* variable (what a Kubernetes Secret
// or a site's environment provides).
void RegisterTlsFlags(CLI::App& app, coordination::TlsFiles& tls) {
  app.add_option("--tls-ca", tls.ca_file,
                 "CA certificate (PEM) to verify the chief's certificate, and the tasks' (default: $" +
                     std::string(kTlsCaVariable) + "; none: plaintext)")
      ->envname(kTlsCaVariable);
  app.add_option("--tls-cert", tls.cert_file,
                 "This task's certificate (PEM), signed by the CA: the chief serves with it, the others present "
                 "it (default: $" + std::string(kTlsCertVariable) + ")")
      ->envname(kTlsCertVariable);
  app.add_option("--tls-key", tls.key_file, "The key of --tls-cert (PEM; default: $" + std::string(kTlsKeyVariable) + ")")
      ->envname(kTlsKeyVariable);
  app.add_option("--tls-server-name", tls.server_name,
                 "Name the chief's certificate must carry, when not its TF_CONFIG host (default: $" +
                     std::string(kTlsServerNameVariable) + ")")
      ->envname(kTlsServerNameVariable);
  app.add_option("--tls-client-auth", tls.client_auth,
                 "require (the default): the chief refuses tasks without a certificate of the CA; none: it asks "
                 "for none ($" + std::string(kTlsClientAuthVariable) + ")")
      ->envname(kTlsClientAuthVariable);
}

// --lr-schedule and its parameters, --scale-lr-by-replicas, --accumulate-steps.
void RegisterScheduleFlags(CLI::App& app, WorkerOptions& o) {
  app.add_option("--lr-schedule", o.lr_schedule,
                 "constant, cosine (Keras' CosineDecay), step (PyTorch's StepLR) or exponential (Keras' "
                 "ExponentialDecay), a function of the optimizer step")
      ->capture_default_str();
  app.add_option("--warmup-steps", o.warmup_steps,
                 "Optimizer steps of linear warm-up from 0 to the learning rate; the schedule starts after them")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  app.add_option("--lr-decay-steps", o.lr_decay_steps,
                 "cosine: steps to decay over (default: the run's steps after warm-up); step, exponential: steps "
                 "per decay by --lr-decay-rate (default: one epoch)")
      ->transform(DecimalInteger<int64_t>());
  app.add_option_function<double>(
      "--lr-decay-rate", [&o](double v) { o.lr_decay_rate = v, o.lr_decay_rate_given = true; },
      "step, exponential: factor per --lr-decay-steps (default: step 0.1, exponential 0.96)");
  app.add_option_function<double>(
      "--lr-alpha", [&o](double v) { o.lr_alpha = v, o.lr_alpha_given = true; },
      "cosine: the final learning rate as a fraction of the peak, Keras' alpha (default 0)");
  app.add_flag("--scale-lr-by-replicas", o.scale_lr_by_replicas,
               "Linear scaling rule: multiply the learning rate by the replicas in sync");
  app.add_option("--accumulate-steps", o.accumulate_steps,
                 "Micro-batches summed into each optimizer step (one all-reduce per step): global batch = batch "
                 "per replica x replicas x K")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
}

// The schedule's name and which of its parameters the flags give.
Status ValidateSchedule(const WorkerOptions& o) {
  const std::string& kind = o.lr_schedule;
  if (kind != "constant" && kind != "cosine" && kind != "step" && kind != "exponential") {
    return InvalidArgumentError("--lr-schedule \"" + kind + "\" is not one of constant, cosine, step, exponential");
  }
  if (o.warmup_steps < 0) {
    return InvalidArgumentError("--warmup-steps " + std::to_string(o.warmup_steps) + " must not be negative");
  }
  if (o.lr_decay_steps < 0) {
    return InvalidArgumentError("--lr-decay-steps " + std::to_string(o.lr_decay_steps) + " must not be negative");
  }
  if (o.lr_decay_steps > 0 && kind == "constant") {
    return InvalidArgumentError("--lr-decay-steps " + std::to_string(o.lr_decay_steps) +
                                " needs --lr-schedule cosine, step or exponential (it is constant)");
  }
  if (o.lr_decay_rate_given) {
    MIRRORED_RETURN_IF_ERROR(Positive("--lr-decay-rate", o.lr_decay_rate));
    if (kind != "step" && kind != "exponential") {
      return InvalidArgumentError("--lr-decay-rate " + CLI::detail::to_string(o.lr_decay_rate) +
                                  " needs --lr-schedule step or exponential (it is " + kind + ")");
    }
  }
  if (o.lr_alpha_given) {
    if (!(o.lr_alpha >= 0 && o.lr_alpha <= 1)) {
      return InvalidArgumentError("--lr-alpha " + CLI::detail::to_string(o.lr_alpha) + " must be a number from 0 to 1");
    }
    if (kind != "cosine") {
      return InvalidArgumentError("--lr-alpha " + CLI::detail::to_string(o.lr_alpha) +
                                  " needs --lr-schedule cosine (it is " + kind + ")");
    }
  }
  if (o.accumulate_steps < 1 || o.accumulate_steps > kMaxAccumulateSteps) {
    return InvalidArgumentError("--accumulate-steps " + std::to_string(o.accumulate_steps) +
                                " is out of range: 1 to " + std::to_string(kMaxAccumulateSteps));
  }
  return OkStatus();
}

}  // namespace

constexpr const char* kDataHelp =
    "Training data: a directory of IDX files (Fashion-MNIST's, or MNIST-named files of any image shape), an .npz "
    "with x_train, y_train, x_test, y_test (np.savez), a directory of those four .npy files, or a directory of "
    "train*.tfrecord and test*.tfrecord files (tf.train.Example)";

namespace {

// --data, how it is read, and --loss (which decides what its labels are).
void RegisterDataFlags(CLI::App& app, WorkerOptions& o) {
  app.add_option("--data", o.data_dir, kDataHelp)
      ->capture_default_str()
      ->check(NonEmptyPath("--data", "give the data's directory or .npz, or leave the flag out for Fashion-MNIST"));
  app.add_option("--tfrecord-image-key", o.tfrecord_image_key,
                 "TFRecord data: the Example feature holding the image (default: image, else image_raw)");
  app.add_option("--tfrecord-label-key", o.tfrecord_label_key, "TFRecord data: the Example feature holding the label")
      ->capture_default_str();
  app.add_option("--loss", o.loss,
                 "sparse_categorical_crossentropy (integer class labels; metric accuracy) or mse (float targets, "
                 "N or N x K, from .npy/.npz or TFRecord; metric mse)")
      ->capture_default_str();
}

}  // namespace

data::DataOptions WorkerOptions::data_options() const {
  return {.tfrecord_image_key = tfrecord_image_key,
          .tfrecord_label_key = tfrecord_label_key,
          .float_targets = loss == "mse"};
}

constexpr const char* kModelJsonHelp =
    "Instead of --model: the model Keras' model.to_json() wrote (Keras 2 or 3, Sequential or Functional; "
    "docs/training.md lists the layers)";

namespace {

// --bucket-mb and the timeouts of the job's rendezvous and collectives.
void RegisterCommunicationFlags(CLI::App& app, WorkerOptions& o) {
  app.add_option("--bucket-mb", o.bucket_mb, "Gradient bucket size in MiB")->capture_default_str();
  app.add_option("--allreduce-dtype", o.allreduce_dtype,
                 "fp32, bf16 or fp16: the type gradient buckets travel in (summed in FP32 where the transport "
                 "allows); weights and metrics stay FP32")
      ->capture_default_str();
  app.add_option("--collective-timeout", o.collective_timeout_sec, "Seconds before a stuck collective fails")
      ->capture_default_str();
  app.add_option("--registration-timeout", o.registration_timeout_sec, "Seconds to wait for every task to register")
      ->capture_default_str();
  app.add_option("--heartbeat-interval", o.heartbeat_interval_sec, "Seconds between heartbeats")->capture_default_str();
  app.add_option("--heartbeat-timeout", o.heartbeat_timeout_sec, "Seconds of silence before a task is lost")
      ->capture_default_str();
}

// --export and --export-dir (no training: main.cc).
void RegisterExportFlags(CLI::App& app, WorkerOptions& o) {
  app.add_option("--export", o.export_checkpoint,
                 "Write checkpoint CKPT_DIR's weights for Keras (model.weights.h5, model.json) and exit; a run "
                 "directory: its latest checkpoint")
      ->type_name("CKPT_DIR")
      ->check(NonEmptyPath("--export", "give a checkpoint directory (RUN_DIR/checkpoints/ckpt-<step>)"));
  app.add_option("--export-dir", o.export_dir, "Where --export writes (default: RUN_DIR/export of its run directory)")
      ->type_name("DIR")
      ->check(NonEmptyPath("--export-dir", "give a directory"));
}

}  // namespace

void WorkerOptions::Register(CLI::App& app) {
  // A flag given twice takes its last value, as argparse and absl do: a
  // script's defaults followed by the user's own (scripts/run-demo.sh
  // --epochs 3) override them instead of failing.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--model", model, "Model: mlp, cnn or resnet")
      ->capture_default_str()
      ->each([this](const std::string&) { model_given = true; });
  app.add_option("--model-json", model_json, kModelJsonHelp)
      ->check(NonEmptyPath("--model-json", "give the file Keras' model.to_json() wrote, or leave the flag out"));
  RegisterDataFlags(app, *this);
  app.add_option("--epochs", epochs, "Epochs to train")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  app.add_option("--max-steps", max_steps, "Stop after this many global steps (0: no limit)")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  app.add_option("--batch-per-replica", batch_per_replica, "Examples per replica per step")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  app.add_option("--optimizer", optimizer, "adam or sgd (momentum 0.9)")->capture_default_str();
  app.add_option_function<double>(
      "--lr", [this](double v) { lr = v, lr_given = true; }, "Learning rate (default: adam 1e-3, sgd 1e-2)");
  RegisterScheduleFlags(app, *this);
  // 0 to 2^63 - 1: checkpoints record the seed as a signed 64-bit integer
  // (state.json's "seed", "data_seed"), and a resumed job compares with it.
  app.add_option("--seed", seed, "Seed of initial weights and shuffling (0 to 2^63-1)")
      ->capture_default_str()
      ->transform(DecimalInteger<uint64_t>(0, INT64_MAX));
  app.add_option("--device", device, "auto, cpu or gpu")->capture_default_str();
  app.add_option("--cpu-replicas", cpu_replicas, "Replicas on a worker without a GPU")
      ->capture_default_str()
      ->transform(DecimalInteger<int>());
  app.add_option("--precision", precision,
                 "fp32, tf32 (TF32 tensor cores), bf16 or fp16 (16-bit products, FP32 weights; fp16 with dynamic "
                 "loss scaling); the GPU computes all four, a CPU fp32 and, with AVX512_BF16, bf16")
      ->capture_default_str();
  app.add_option("--initial-loss-scale", initial_loss_scale, "fp16: the dynamic loss scale to start from")
      ->capture_default_str();
  app.add_option("--run-dir", run_dir, "Run directory: checkpoints, logs, metrics.jsonl")
      ->check(NonEmptyPath("--run-dir", "give a directory, or leave the flag out to save nothing"));
  app.add_flag("--restart-from-scratch", restart_from_scratch,
               "When every checkpoint of the run directory is damaged, train from step 0 over them (without it: "
               "exit 2 naming them)");
  app.add_option("--checkpoint-every", checkpoint_every, "Steps between checkpoints (0: each epoch's end)")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  app.add_option("--keep-checkpoints", keep_checkpoints, "Checkpoints to keep")
      ->capture_default_str()
      ->transform(DecimalInteger<int>());
  app.add_option("--log-every", log_every, "Steps between progress lines and metrics")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  // Two flags, so that --help does not show the negation's value ("{false}")
  // as if it were the default. Each sets `validate` as it is parsed
  // (trigger_on_parse), so the last one on the command line wins; CLI11 runs
  // the other callbacks after parsing, in declaration order, where
  // `--no-validate --validate` left validation off.
  app.add_flag_function("--validate", [this](int64_t v) { validate = v > 0; },  // --validate=false: -1
                        "Evaluate the test set at each epoch's end (the default)")
      ->trigger_on_parse();
  app.add_flag_function("--no-validate", [this](int64_t v) { validate = v <= 0; }, "Do not evaluate the test set")
      ->trigger_on_parse();
  app.add_flag("--verify-replicas", verify_replicas,
               "After every step, check (two tiny all-reduces) that all replicas hold identical weights");
  RegisterCommunicationFlags(app, *this);
  RegisterTlsFlags(app, tls);
  RegisterExportFlags(app, *this);
  app.add_option("--poll-interval", poll_interval_sec, "Evaluator: seconds between checkpoint scans")
      ->capture_default_str();
  app.add_option("--max-evaluations", max_evaluations, "Evaluator: stop after N evaluations (0: at the final)")
      ->capture_default_str()
      ->transform(DecimalInteger<int64_t>());
  app.add_option("--eval-timeout", eval_timeout_sec, "Evaluator: give up after SEC without a new checkpoint (0: never)")
      ->capture_default_str();
}

Status WorkerOptions::Validate() const {
  if (model != "mlp" && model != "cnn" && model != "resnet") {
    return InvalidArgumentError("--model \"" + model + "\" is not one of mlp, cnn, resnet");
  }
  if (!export_dir.empty() && export_checkpoint.empty()) {
    return InvalidArgumentError("--export-dir " + export_dir + " is given without --export CKPT_DIR");
  }
  if (model_given && !model_json.empty()) {
    return InvalidArgumentError("--model " + model + " and --model-json " + model_json + " are both given: give one");
  }
  if (optimizer != "adam" && optimizer != "sgd") {
    return InvalidArgumentError("--optimizer \"" + optimizer + "\" is not one of adam, sgd");
  }
  if (loss != "sparse_categorical_crossentropy" && loss != "mse") {
    return InvalidArgumentError("--loss \"" + loss + "\" is not one of sparse_categorical_crossentropy, mse");
  }
  if (device != "auto" && device != "cpu" && device != "gpu") {
    return InvalidArgumentError("--device \"" + device + "\" is not one of auto, cpu, gpu");
  }
  MIRRORED_ASSIGN_OR_RETURN(model::Precision p, model::ParsePrecision(precision));
  // With --device auto the replicas' device is known only once the job has
  // formed (the trainer checks again then); --device cpu is refused now.
  if (device == "cpu") MIRRORED_RETURN_IF_ERROR(model::CheckCpuPrecision(p));
  if (!(initial_loss_scale >= 1) || !(initial_loss_scale <= 3.4e38)) {
    return InvalidArgumentError("--initial-loss-scale " + CLI::detail::to_string(initial_loss_scale) +
                                " must be a number from 1 to 3.4e38");
  }
  if (epochs < 1) return InvalidArgumentError("--epochs " + std::to_string(epochs) + " must be at least 1");
  if (max_steps < 0) return InvalidArgumentError("--max-steps " + std::to_string(max_steps) + " must not be negative");
  if (batch_per_replica < 1 || batch_per_replica > 1 << 20) {
    return InvalidArgumentError("--batch-per-replica " + std::to_string(batch_per_replica) +
                                " is out of range: 1 to 1048576");
  }
  if (lr_given || lr != 0) MIRRORED_RETURN_IF_ERROR(Positive("--lr", lr));
  MIRRORED_RETURN_IF_ERROR(ValidateSchedule(*this));
  if (cpu_replicas < 1 || cpu_replicas > 256) {
    return InvalidArgumentError("--cpu-replicas " + std::to_string(cpu_replicas) + " is out of range: 1 to 256");
  }
  if (checkpoint_every < 0) {
    return InvalidArgumentError("--checkpoint-every " + std::to_string(checkpoint_every) + " must not be negative");
  }
  if (keep_checkpoints < 1) {
    return InvalidArgumentError("--keep-checkpoints " + std::to_string(keep_checkpoints) + " must be at least 1");
  }
  if (log_every < 1) return InvalidArgumentError("--log-every " + std::to_string(log_every) + " must be at least 1");
  MIRRORED_RETURN_IF_ERROR(Positive("--bucket-mb", bucket_mb));
  MIRRORED_RETURN_IF_ERROR(ParseWireType(allreduce_dtype).status());
  MIRRORED_RETURN_IF_ERROR(Seconds("--collective-timeout", collective_timeout_sec));
  MIRRORED_RETURN_IF_ERROR(Seconds("--registration-timeout", registration_timeout_sec));
  MIRRORED_RETURN_IF_ERROR(Seconds("--heartbeat-interval", heartbeat_interval_sec));
  MIRRORED_RETURN_IF_ERROR(Seconds("--heartbeat-timeout", heartbeat_timeout_sec));
  MIRRORED_RETURN_IF_ERROR(Seconds("--poll-interval", poll_interval_sec));
  if (heartbeat_timeout_sec <= heartbeat_interval_sec) {
    return InvalidArgumentError("--heartbeat-timeout " + CLI::detail::to_string(heartbeat_timeout_sec) +
                                " must be longer than --heartbeat-interval " +
                                CLI::detail::to_string(heartbeat_interval_sec));
  }
  MIRRORED_RETURN_IF_ERROR(coordination::TlsCredentials::Load(tls).status());
  if (max_evaluations < 0) {
    return InvalidArgumentError("--max-evaluations " + std::to_string(max_evaluations) + " must not be negative");
  }
  MIRRORED_RETURN_IF_ERROR(Seconds("--eval-timeout", eval_timeout_sec, /*zero_allowed=*/true));
  return OkStatus();
}

std::chrono::milliseconds MillisecondsOf(double seconds) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
}

}  // namespace mirrored
