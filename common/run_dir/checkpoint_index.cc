#include "common/run_dir/checkpoint_index.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"

namespace mirrored {

std::string CheckpointsDir(const std::string& run_dir) { return JoinPath(run_dir, "checkpoints"); }

std::string CheckpointDirName(int64_t step) { return "ckpt-" + std::to_string(step); }

std::optional<int64_t> ParseCheckpointDirName(const std::string& name) {
  constexpr std::string_view kPrefix = "ckpt-";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size() ||
      name.size() > kPrefix.size() + 18) {
    return std::nullopt;
  }
  std::string_view digits = std::string_view(name).substr(kPrefix.size());
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::string CheckpointIndex::ToJsonText() const {
  nlohmann::json json = nlohmann::json::object();
  json["latest"] = latest ? nlohmann::json(CheckpointDirName(*latest)) : nlohmann::json(nullptr);
  nlohmann::json names = nlohmann::json::array();
  for (int64_t step : kept) names.push_back(CheckpointDirName(step));
  json["kept"] = std::move(names);
  if (!pruned.empty()) {
    nlohmann::json gone = nlohmann::json::array();
    for (int64_t step : pruned) gone.push_back(CheckpointDirName(step));
    json["pruned"] = std::move(gone);
  }
  return json.dump(2) + "\n";
}

StatusOr<CheckpointIndex> CheckpointIndex::FromJsonText(std::string_view text,
                                                        const std::string& file_name) {
  auto fail = [&](const std::string& what) { return DataLossError(file_name + ": " + what); };
  if (auto at = JsonNestingPastLimit(text)) return fail(JsonTooDeepMessage(*at));
  nlohmann::json json = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) return fail("not a JSON object");
  CheckpointIndex index;
  auto latest = json.find("latest");
  if (latest == json.end()) return fail("missing \"latest\"");
  if (!latest->is_null()) {
    if (!latest->is_string()) return fail("\"latest\" is not a string");
    index.latest = ParseCheckpointDirName(latest->get<std::string>());
    if (!index.latest) return fail("\"latest\" is not a ckpt-<step> name");
  }
  auto kept = json.find("kept");
  if (kept == json.end() || !kept->is_array()) return fail("missing or non-array \"kept\"");
  for (const auto& name : *kept) {
    std::optional<int64_t> step =
        name.is_string() ? ParseCheckpointDirName(name.get<std::string>()) : std::nullopt;
    if (!step) return fail("\"kept\" has an entry that is not a ckpt-<step> name");
    index.kept.push_back(*step);
  }
  std::sort(index.kept.begin(), index.kept.end());
  // Absent in indexes written before it; advisory, so a malformed list
  // reads as empty rather than making "latest" and "kept" unusable.
  if (auto pruned = json.find("pruned"); pruned != json.end() && pruned->is_array()) {
    for (const auto& name : *pruned) {
      std::optional<int64_t> step =
          name.is_string() ? ParseCheckpointDirName(name.get<std::string>()) : std::nullopt;
      if (!step) {
        index.pruned.clear();
        break;
      }
      index.pruned.push_back(*step);
    }
    std::sort(index.pruned.begin(), index.pruned.end());
  }
  return index;
}

StatusOr<CheckpointIndex> CheckpointIndex::Read(FileEnv* env, const std::string& run_dir) {
  const std::string path = JoinPath(CheckpointsDir(run_dir), kIndexFileName);
  MIRRORED_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return FromJsonText(text, path);
}

Status CheckpointIndex::Write(FileEnv* env, const std::string& run_dir) const {
  return WriteFileAtomically(env, CheckpointsDir(run_dir), kIndexFileName, ToJsonText(),
                             std::string(kTempPrefix) + "checkpoint-");
}

}  // namespace mirrored
