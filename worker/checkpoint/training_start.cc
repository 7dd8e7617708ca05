#include "worker/checkpoint/training_start.h"

#include <nlohmann/json.hpp>

#include "worker/checkpoint/checkpoint_index.h"
#include "worker/checkpoint/training_done.h"

namespace mirrored {

StatusOr<std::string> TrainingStart::Write(FileEnv* env, const std::string& run_dir, int64_t from_step) {
  if (Status made = env->CreateDir(CheckpointsDir(run_dir)); !made.ok() && made.code() != StatusCode::kAlreadyExists) {
    return made;
  }
  const std::string run = RandomHexSuffix();
  nlohmann::json json = {{"from_step", from_step}, {"run", run}, {"time", UnixNow()}};
  // Not kTempPrefix, which the chief's pruning removes (as for the lease).
  MIRRORED_RETURN_IF_ERROR(WriteFileAtomically(env, CheckpointsDir(run_dir), kTrainingStartFileName,
                                               json.dump() + "\n", ".training-start-"));
  return run;
}

StatusOr<std::optional<TrainingStart::Record>> TrainingStart::Read(FileEnv* env, const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kTrainingStartFileName);
  StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::optional<Record>();
    return text.status();
  }
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json["from_step"].is_number_integer() ||
      !json["run"].is_string() || !json["time"].is_number()) {
    return DataLossError(path + ": not a {\"from_step\": <integer>, \"run\": <string>, \"time\": <seconds>} object");
  }
  return std::optional<Record>(
      Record{json["from_step"].get<int64_t>(), json["run"].get<std::string>(), json["time"].get<double>()});
}

}  // namespace mirrored
