// state.json of a checkpoint: where training stands (step, epoch, position
// in the epoch's shuffled order), the seeds and cluster shape it ran with,
// and whether it is the final checkpoint of the run.
//
//   CheckpointState s; s.step = 600; s.epoch = 1; s.step_in_epoch = 131; s.model = "cnn";
//   std::string text = s.ToJson().dump(2);
//   auto back = CheckpointState::FromJsonText(text, "state.json");   // StatusOr
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored {

struct CheckpointState {
  static constexpr int kFormatVersion = 1;

  int64_t step = 0;           // optimizer steps completed (= the directory's <step>)
  int64_t epoch = 0;          // epoch the next step belongs to (0-based)
  int64_t step_in_epoch = 0;  // batches of `epoch` already consumed, in its shuffled order
  int64_t seed = 0;           // --seed: weight init
  int64_t data_seed = 0;      // shuffling seed (the epoch's order derives from it and `epoch`)
  int64_t world_size = 1;     // replicas in total when written
  int64_t num_workers = 1;    // worker tasks when written
  int64_t global_batch_size = 0;
  std::string model;      // model name, e.g. "cnn", or "keras:<name>" for --model-json
  // --model-json's Keras model (what model.to_json() wrote), so that the
  // evaluator and a resume rebuild it; null for a zoo model.
  nlohmann::json model_json;
  // The data it was trained on: image height, width, channels and the
  // class count (the model's input and output). Empty / 0 in checkpoints
  // of earlier versions (the tensors' shapes tell then).
  std::vector<int64_t> data_shape;
  int64_t classes = 0;
  // --loss when not sparse_categorical_crossentropy ("mse": classes is
  // then the target width); empty otherwise and in earlier versions.
  std::string loss;
  std::string optimizer;  // "adam" or "sgd"
  // --precision of the run that wrote it ("fp32" when absent: earlier
  // versions). Tensors are FP32 in every precision, so any run resumes it.
  std::string precision;
  // fp16's dynamic loss scale and the finite steps since it last changed
  // (loss_scale.h); 0 / absent without loss scaling.
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
  bool final = false;     // the run's last checkpoint: the evaluator stops after it
  std::string mirrored_version;
  double wall_time = 0;  // Unix seconds when written
  // Size and CRC-32C of each data file ("model.safetensors", ...), checked
  // when the checkpoint is loaded: a file damaged after it was written (same
  // size, other bytes) is refused, not trained on. Absent in checkpoints of
  // earlier versions (nothing to check).
  struct FileDigest {
    uint64_t bytes = 0;
    uint32_t crc32c = 0;
    friend bool operator==(const FileDigest&, const FileDigest&) = default;
  };
  std::map<std::string, FileDigest> files;

  nlohmann::json ToJson() const;
  // state.json's text: ToJson() plus "state_crc32c", the CRC-32C of the rest
  // (FromJsonText checks it, so one changed digit is a damaged checkpoint,
  // not a different position in training).
  std::string ToJsonText() const;
  static constexpr const char* kStateCrcKey = "state_crc32c";
  // Unknown keys are ignored (newer writers); missing required keys, wrong
  // types and out-of-range values are DataLoss errors naming `file_name`
  // and the field.
  static StatusOr<CheckpointState> FromJson(const nlohmann::json& json,
                                            const std::string& file_name);
  static StatusOr<CheckpointState> FromJsonText(std::string_view text,
                                                const std::string& file_name);
  // InvalidArgument naming the field when a value is out of range.
  Status Validate() const;

  friend bool operator==(const CheckpointState&, const CheckpointState&) = default;
};

}  // namespace mirrored
