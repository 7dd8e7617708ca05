#include "worker/checkpoint/training_start.h"

#include <nlohmann/json.hpp>

#include "common/run_dir/checkpoint_index.h"
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
  const std::string shape = "{\"from_step\": <integer>, \"run\": <string>, \"time\": <seconds>}";
  MIRRORED_ASSIGN_OR_RETURN(std::optional<nlohmann::json> json,
                            ReadRecordFile(env, run_dir, kTrainingStartFileName, shape));
  if (!json) return std::optional<Record>();
  nlohmann::json& j = *json;
  if (!j["from_step"].is_number_integer() || !j["run"].is_string() || !j["time"].is_number()) {
    return DataLossError(JoinPath(CheckpointsDir(run_dir), kTrainingStartFileName) + ": not a " + shape + " object");
  }
  return std::optional<Record>(
      Record{j["from_step"].get<int64_t>(), j["run"].get<std::string>(), j["time"].get<double>()});
}

}  // namespace mirrored
