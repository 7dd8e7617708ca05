// The evaluator's model: one copy on the evaluator's device (--device: the
// first visible GPU, or the CPU), into which each checkpoint's weights are
// restored and scored on the whole test set of --data (built for its
// image shape and class count).
//
//   MIRRORED_ASSIGN_OR_RETURN(auto scorer, TestSetEvaluator::Create(options, std::move(data)));
//   MIRRORED_ASSIGN_OR_RETURN(TestSetEvaluator::Result r, scorer->Evaluate(loaded_checkpoint));
//   std::printf("loss %.4f accuracy %.4f\n", r.loss, r.accuracy);
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/run_dir/checkpoint_reader.h"
#include "common/status.h"
#include "worker/data/training_data.h"
#include "worker/eval/evaluator_options.h"
#include "worker/model/model.h"

namespace mirrored {

class TestSetEvaluator {
 public:
  struct Result {
    double loss = 0;
    double accuracy = 0;
  };
  // Picks the device and binds this thread to it (a GPU). `data` is the
  // data set whose test split is evaluated. Errors: --device's (none of the
  // kind asked for), Internal when the GPU cannot be bound.
  static StatusOr<std::unique_ptr<TestSetEvaluator>> Create(const EvaluatorOptions& options, data::TrainingData data);

  // Restores `checkpoint`'s weights into a model of the kind its state.json
  // names, or the Keras model it records (made anew when that changes; an
  // explicit --model that differs is warned about once) and evaluates it.
  // Errors: the model's (unknown model, weights that do not fit it),
  // InvalidArgument for a checkpoint trained on data of another shape (its
  // state.json), Internal for a CUDA error, naming the
  // checkpoint and the GPU.
  StatusOr<Result> Evaluate(const LoadedCheckpoint& checkpoint);

 private:
  TestSetEvaluator(const EvaluatorOptions& options, data::TrainingData data, int gpu)
      : model_option_(options.model), data_dir_(options.data_dir), data_(std::move(data)), gpu_(gpu) {}
  StatusOr<std::unique_ptr<model::Backend>> MakeBackend() const;
  // InvalidArgument when the checkpoint's --loss is not the one --data was
  // read for (float targets or class labels).
  Status CheckLoss(const LoadedCheckpoint& checkpoint) const;

  const std::optional<std::string> model_option_;  // --model given explicitly: checked against each checkpoint's
  const std::string data_dir_;  // --data, for messages
  data::TrainingData data_;
  const int gpu_;  // -1: the CPU
  std::unique_ptr<model::Model> model_;
  nlohmann::json model_json_;  // model_'s Keras JSON (null: a zoo model)
  bool said_model_ = false;
};

}  // namespace mirrored
