// What the built-in training loop (trainer.h) is told, grouped as a reader
// looks for it: the model, the data, the optimizer and its learning-rate
// schedule, the run's length, the checkpoints, validation, the collectives.
// mirrored-worker fills it in from its flags in one place
// (worker/role_options.h); a test or a program of its own sets what it
// needs. Each field says the flag it stands for: messages name the flags.
//
//   TrainerOptions o;
//   o.model.name = "mlp";  o.data.dir = "data/fashion-mnist";  o.steps.epochs = 2;
//   StatusOr<TrainSummary> r = Train(o, *strategy);
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "worker/data/data_options.h"
#include "worker/train/learning_rate_schedule_options.h"

namespace mirrored {

struct TrainerOptions {
  struct Model {
    std::string name = "cnn";  // --model: mlp, cnn or resnet
    std::string keras_json;    // --model-json: a Keras model's JSON file, instead of name (model_choice.h)
    // --loss: sparse_categorical_crossentropy (class labels) or mse (float
    // targets; the metric is then mse, not accuracy).
    std::string loss = "sparse_categorical_crossentropy";
    std::string precision = "fp32";     // --precision: fp32 | tf32 | bf16 | fp16 (model/precision.h)
    double initial_loss_scale = 32768;  // --initial-loss-scale: fp16's dynamic loss scale to start from
  };
  struct Data {
    std::string dir = "/usr/share/datasets/fashion-mnist";  // --data (training_data.h)
    std::string tfrecord_image_key;                         // --tfrecord-image-key ("": image, else image_raw)
    std::string tfrecord_label_key = "label";               // --tfrecord-label-key
  };
  struct Optimizer {
    std::string name = "adam";  // --optimizer: adam or sgd
    double lr = 0;              // --lr; 0: the optimizer's default
    // The learning rate to use: lr, or the optimizer's default (adam 1e-3, sgd 1e-2).
    double EffectiveLearningRate() const;
  };
  // How long the run is, in global steps of global batches.
  struct Steps {
    int64_t epochs = 1;              // --epochs
    int64_t max_steps = 0;           // --max-steps; 0: no limit beyond epochs
    int64_t batch_per_replica = 64;  // --batch-per-replica
    int64_t accumulate_steps = 1;    // --accumulate-steps: micro-batches per optimizer step
    int64_t log_every = 50;          // --log-every: steps between progress lines / metrics
  };
  struct Checkpoints {
    std::string run_dir;                // --run-dir; "": no checkpoints, no logs (a dry training run)
    bool restart_from_scratch = false;  // --restart-from-scratch: every checkpoint damaged, train over them
    int64_t every = 0;                  // --checkpoint-every; 0: at the end of each epoch
    int keep = 5;                       // --keep-checkpoints
  };
  struct Validation {
    bool test_set = true;   // --validate: the test set at each epoch's end
    bool replicas = false;  // --verify-replicas: replicas hold identical weights after every step
  };
  struct Communication {
    double bucket_mb = 25;                                    // --bucket-mb: gradient bucket size
    std::string allreduce_dtype = "fp32";  // --allreduce-dtype: fp32 | bf16 | fp16, the buckets' (comm/wire_type.h)
    std::chrono::milliseconds collective_timeout{300'000};    // --collective-timeout
    std::chrono::milliseconds registration_timeout{300'000};  // --registration-timeout
  };

  Model model;
  Data data;
  uint64_t seed = 42;  // --seed: initial weights and shuffling
  Optimizer optimizer;
  LearningRateScheduleOptions schedule;
  Steps steps;
  Checkpoints checkpoints;
  Validation validation;
  Communication communication;

  // How data.dir is read (float targets under --loss mse).
  data::DataOptions data_options() const;
};

}  // namespace mirrored
