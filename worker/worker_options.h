// Every flag of mirrored-worker (DESIGN.md, "Flags users can count on"),
// registered with CLI11 and validated with messages that name the flag.
//
//   WorkerOptions o;
//   o.Register(app);   app.parse(argc, argv);
//   if (Status s = o.Validate(); !s.ok()) return ExitCodeFor(s);   // 2
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "worker/coordination/tls_files.h"
#include "worker/data/data_options.h"

namespace CLI {
class App;  // CLI11: only worker_options.cc and main.cc parse flags
}  // namespace CLI

namespace mirrored {

// The longest duration a seconds flag takes (--collective-timeout and the
// like): longer would overflow the clocks they become.
inline constexpr double kMaxFlagSeconds = 1e9;

// The most micro-batches --accumulate-steps sums into one optimizer step.
inline constexpr int64_t kMaxAccumulateSteps = 4096;

struct WorkerOptions {
  // Model and data.
  std::string model = "cnn";
  bool model_given = false;  // --model was on the command line (the evaluator takes a checkpoint's own)
  std::string model_json;    // --model-json: a Keras model's JSON file, instead of --model (model_choice.h)
  std::string data_dir = "/usr/share/datasets/fashion-mnist";  // or an .npz, or a directory of .npy (training_data.h)
  std::string tfrecord_image_key;           // TFRecord data's image feature ("": image, else image_raw)
  std::string tfrecord_label_key = "label";  // and its label feature
  // How --data is read (--loss mse: float targets).
  data::DataOptions data_options() const;
  int64_t epochs = 1;
  int64_t max_steps = 0;  // 0: no limit beyond --epochs
  int64_t batch_per_replica = 64;
  std::string optimizer = "adam";
  // sparse_categorical_crossentropy (class labels) or mse (float targets,
  // mean squared error; the metric is then mse, not accuracy).
  std::string loss = "sparse_categorical_crossentropy";
  double lr = 0;          // 0: the optimizer's default (adam 1e-3, sgd 1e-2)
  bool lr_given = false;  // --lr was on the command line (then 0 is an error, not the default)
  uint64_t seed = 42;

  // Learning-rate schedule and gradient accumulation (train/learning_rate_schedule.h).
  std::string lr_schedule = "constant";  // constant | cosine | step | exponential
  int64_t warmup_steps = 0;              // linear warm-up from 0 over the first N optimizer steps
  int64_t lr_decay_steps = 0;            // 0: cosine the run's steps after warm-up, step/exponential one epoch
  double lr_decay_rate = 0;              // not given: step 0.1, exponential 0.96
  bool lr_decay_rate_given = false;      // --lr-decay-rate was on the command line
  double lr_alpha = 0;                   // cosine: the final rate as a fraction of the peak (Keras' alpha)
  bool lr_alpha_given = false;           // --lr-alpha was on the command line
  bool scale_lr_by_replicas = false;     // the linear scaling rule: lr x replicas in sync
  int64_t accumulate_steps = 1;          // micro-batches per optimizer step

  // Devices.
  std::string device = "auto";  // auto | cpu | gpu
  int cpu_replicas = 1;
  std::string precision = "fp32";    // fp32 | tf32 | bf16 | fp16 (model/precision.h)
  double initial_loss_scale = 32768;  // fp16's dynamic loss scale to start from (model/loss_scale.h)

  // Run directory, checkpoints, logging.
  std::string run_dir;            // "" : no checkpoints, no logs (a dry training run)
  bool restart_from_scratch = false;  // every checkpoint damaged: train from step 0 over them
  int64_t checkpoint_every = 0;   // 0: at the end of each epoch
  int keep_checkpoints = 5;
  int64_t log_every = 50;         // steps between progress lines / metrics
  bool validate = true;
  bool verify_replicas = false;   // check after every step that replicas hold identical weights

  // Communication.
  double bucket_mb = 25;
  std::string allreduce_dtype = "fp32";  // fp32 | bf16 | fp16: what gradient buckets travel as (comm/wire_type.h)
  double collective_timeout_sec = 300;
  double registration_timeout_sec = 300;
  double heartbeat_interval_sec = 1;
  double heartbeat_timeout_sec = 5;

  // TLS of the coordination service (docs/security.md): --tls-ca, --tls-cert,
  // --tls-key, --tls-server-name, --tls-client-auth; each defaults to its
  // MIRRORED_TLS_* variable.
  coordination::TlsFiles tls;

  // --export CKPT_DIR: write CKPT_DIR's weights for Keras (export/keras_export.h)
  // into --export-dir (default RUN_DIR/export) and exit, training nothing.
  std::string export_checkpoint;
  std::string export_dir;

  // Evaluator.
  double poll_interval_sec = 1;
  int64_t max_evaluations = 0;    // 0: until the final checkpoint
  double eval_timeout_sec = 0;    // 0: no limit

  void Register(CLI::App& app);
  // InvalidArgument naming the flag and the value (for TLS, the file and
  // what is wrong with it: TlsCredentials::Load).
  Status Validate() const;
};

// A flag given in seconds (--collective-timeout-sec) as the duration it sets,
// truncated to the millisecond.
std::chrono::milliseconds MillisecondsOf(double seconds);

}  // namespace mirrored
