// A model's weights as Keras loads them: EXPORT_DIR/model.json (the Keras
// model: --model-json's as given, or the zoo model's, keras_zoo_json.h) and
// EXPORT_DIR/model.weights.h5 (keras_weights_h5.h), written as a pair: both
// into a temporary directory beside EXPORT_DIR, fsynced, which then takes
// EXPORT_DIR's place whole (so a new JSON never sits beside old weights).
// The chief writes RUN_DIR/export/ at the end of training;
// `mirrored-worker --export CKPT_DIR` writes it for any checkpoint.
//
//   MIRRORED_ASSIGN_OR_RETURN(KerasExport e, ExportKeras(FileEnv::Default(), choice, *model, run_dir + "/export"));
//   StatusOr<KerasExport> e = ExportCheckpoint(FileEnv::Default(), "runs/x/checkpoints/ckpt-40", "");
//   // python: m = tf_keras.models.model_from_json(open(e.json_path).read()); m.load_weights(e.weights_path)
//
// The model takes what mirrored's takes: uint8 pixels divided by 255,
// float32 ones as they are. A zoo model gives logits; a --model-json model
// ends as its JSON says (a final softmax included).
#pragma once

#include <cstdint>
#include <string>

#include "common/run_dir/file_env.h"
#include "common/status.h"
#include "worker/model/model.h"
#include "worker/model/model_choice.h"

namespace mirrored {

inline constexpr char kExportDirName[] = "export";  // RUN_DIR/export
inline constexpr char kKerasWeightsFileName[] = "model.weights.h5";
inline constexpr char kKerasJsonFileName[] = "model.json";

struct KerasExport {
  std::string weights_path;  // EXPORT_DIR/model.weights.h5
  std::string json_path;     // EXPORT_DIR/model.json
  int weight_layers = 0;     // layers with weights written
  int64_t step = -1;         // the checkpoint's step (ExportCheckpoint)
};

// Writes `model`'s weights (the model `choice` built) and its Keras JSON
// as `export_dir`, replacing a previous export there whole (its parent must
// exist). Errors: Internal naming a tensor the Keras model has no place
// for (or lacks), or the HDF5 call; InvalidArgument when `export_dir` holds
// other files than an export's (it would be replaced); the file error
// naming the path. On an error the previous export is left as it was.
StatusOr<KerasExport> ExportKeras(FileEnv* env, const model::ModelChoice& choice, model::Model& model,
                                  const std::string& export_dir);

// The chief's end of training: ExportKeras into RUN_DIR/export (FileEnv's
// default), and an INFO line naming the files.
Status ExportFinalWeights(const model::ModelChoice& choice, model::Model& model, const std::string& run_dir);

// --export: the checkpoint `path` (a ckpt-<step> directory, anywhere; or a
// run directory: its latest complete checkpoint) into `export_dir` (empty:
// RUN_DIR/export of the run directory it lies in). Errors: InvalidArgument
// naming the directory or file when it is not a checkpoint, is damaged or
// does not match its model; those of ExportKeras.
StatusOr<KerasExport> ExportCheckpoint(FileEnv* env, const std::string& path, std::string export_dir);

}  // namespace mirrored
