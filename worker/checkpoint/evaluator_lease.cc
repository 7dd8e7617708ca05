#include "worker/checkpoint/evaluator_lease.h"

#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/logging.h"

#include "common/run_dir/checkpoint_index.h"

namespace mirrored {

StatusOr<EvaluatorLease::State> EvaluatorLease::Read(FileEnv* env, const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kEvalLeaseFileName);
  StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return State{};
    return text.status();
  }
  if (auto at = JsonNestingPastLimit(*text)) return DataLossError(path + ": " + JsonTooDeepMessage(*at));
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return DataLossError(path + ": not a JSON object");
  State state;
  auto reading = json.find("reading");
  if (reading != json.end() && !reading->is_null()) {
    if (!reading->is_string() ||
        !(state.reading = ParseCheckpointDirName(reading->get<std::string>()))) {
      return DataLossError(path + ": \"reading\" is not a ckpt-<step> name");
    }
  }
  auto done = json.find("last_evaluated_step");
  if (done != json.end() && !done->is_null()) {
    if (!done->is_number_integer())
      return DataLossError(path + ": \"last_evaluated_step\" is not an integer");
    state.last_evaluated_step = done->get<int64_t>();
  }
  auto start_run = json.find("start_run");
  if (start_run != json.end() && !start_run->is_null()) {
    if (!start_run->is_string()) return DataLossError(path + ": \"start_run\" is not a string");
    state.start_run = start_run->get<std::string>();
  }
  auto following = json.find("following");
  if (following != json.end() && !following->is_null()) {
    if (!following->is_boolean()) return DataLossError(path + ": \"following\" is not a boolean");
    state.following = following->get<bool>();
  }
  return state;
}

Status EvaluatorLease::Write(FileEnv* env, const std::string& run_dir, const State& state) {
  nlohmann::json json = nlohmann::json::object();
  json["reading"] =
      state.reading ? nlohmann::json(CheckpointDirName(*state.reading)) : nlohmann::json(nullptr);
  json["last_evaluated_step"] = state.last_evaluated_step
                                    ? nlohmann::json(*state.last_evaluated_step)
                                    : nlohmann::json(nullptr);
  json["following"] = state.following;
  json["start_run"] = state.start_run ? nlohmann::json(*state.start_run) : nlohmann::json(nullptr);
  // Not kTempPrefix: the chief removes stray ".tmp-*" entries, and must not
  // remove the evaluator's temp file while the evaluator writes it.
  return WriteFileAtomically(env, CheckpointsDir(run_dir), kEvalLeaseFileName, json.dump() + "\n",
                             ".eval-lease-");
}

EvaluatorLease::State EvaluatorLease::ReadOrEmpty(FileEnv* env, const std::string& run_dir) {
  StatusOr<State> state = Read(env, run_dir);
  if (state.ok()) return *state;
  MIRRORED_LOG(WARNING) << "rewriting the evaluator's lease from scratch (its progress is lost): "
                        << state.status();
  return State{};
}

Status EvaluatorLease::Follow(FileEnv* env, const std::string& run_dir) {
  // The evaluator may start before the chief has written anything.
  if (Status made = env->CreateDir(CheckpointsDir(run_dir));
      !made.ok() && made.code() != StatusCode::kAlreadyExists) {
    return made;
  }
  State next = ReadOrEmpty(env, run_dir);
  next.reading = std::nullopt;
  next.following = true;
  return Write(env, run_dir, next);
}

// Acquire and MarkEvaluated are called only while the evaluator follows the
// job: a lease deleted or damaged meanwhile is rewritten as following, so the
// chief keeps protecting the backlog.
Status EvaluatorLease::Acquire(FileEnv* env, const std::string& run_dir, int64_t step) {
  State next = ReadOrEmpty(env, run_dir);
  next.reading = step;
  next.following = true;
  return Write(env, run_dir, next);
}

Status EvaluatorLease::MarkEvaluated(FileEnv* env, const std::string& run_dir, int64_t step,
                                     const std::string& start_run) {
  State next = ReadOrEmpty(env, run_dir);
  next.reading = std::nullopt;
  next.last_evaluated_step = step;
  if (!start_run.empty()) next.start_run = start_run;
  next.following = true;
  return Write(env, run_dir, next);
}

Status EvaluatorLease::Release(FileEnv* env, const std::string& run_dir, int64_t step) {
  State next = ReadOrEmpty(env, run_dir);
  if (next.reading == step) next.reading = std::nullopt;
  next.following = true;
  return Write(env, run_dir, next);
}

Status EvaluatorLease::Stop(FileEnv* env, const std::string& run_dir) {
  State next = ReadOrEmpty(env, run_dir);
  next.reading = std::nullopt;
  next.following = false;
  return Write(env, run_dir, next);
}

Status EvaluatorLease::Pause(FileEnv* env, const std::string& run_dir) {
  State next = ReadOrEmpty(env, run_dir);
  next.reading = std::nullopt;
  next.following = true;
  return Write(env, run_dir, next);
}

}  // namespace mirrored
