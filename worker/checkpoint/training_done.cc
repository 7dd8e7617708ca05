#include "worker/checkpoint/training_done.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/run_dir/checkpoint_index.h"

namespace mirrored {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Status TrainingDone::Write(FileEnv* env, const std::string& run_dir, int64_t step) {
  nlohmann::json json = {
      {"checkpoint", CheckpointDirName(step)}, {"step", step}, {"run", RandomHexSuffix()}, {"time", UnixNow()}};
  // Not kTempPrefix, which the chief's pruning removes (as for the lease).
  return WriteFileAtomically(env, CheckpointsDir(run_dir), kTrainingDoneFileName, json.dump() + "\n",
                             ".training-done-");
}

Status TrainingDone::Remove(FileEnv* env, const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kTrainingDoneFileName);
  if (!env->FileExists(path)) return OkStatus();
  Status s = env->RemoveFile(path);
  return s.ok() || s.code() == StatusCode::kNotFound ? OkStatus() : s;
}

StatusOr<std::optional<nlohmann::json>> ReadRecordFile(FileEnv* env, const std::string& run_dir,
                                                       const std::string& name, const std::string& shape) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), name);
  StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::optional<nlohmann::json>();
    return text.status();
  }
  if (auto at = JsonNestingPastLimit(*text)) return DataLossError(path + ": " + JsonTooDeepMessage(*at));
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return DataLossError(path + ": not a " + shape + " object");
  return std::optional<nlohmann::json>(std::move(json));
}

StatusOr<std::optional<TrainingDone::Record>> TrainingDone::Read(FileEnv* env, const std::string& run_dir) {
  const std::string shape = "{\"step\": <integer>, \"run\": <string>, \"time\": <seconds>}";
  MIRRORED_ASSIGN_OR_RETURN(std::optional<nlohmann::json> json, ReadRecordFile(env, run_dir, kTrainingDoneFileName, shape));
  if (!json) return std::optional<Record>();
  nlohmann::json& j = *json;
  if (!j["step"].is_number_integer() || !j["run"].is_string() || !j["time"].is_number()) {
    return DataLossError(JoinPath(CheckpointsDir(run_dir), kTrainingDoneFileName) + ": not a " + shape + " object");
  }
  return std::optional<Record>(Record{j["step"].get<int64_t>(), j["run"].get<std::string>(), j["time"].get<double>()});
}

}  // namespace mirrored
