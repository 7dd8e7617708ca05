#include "worker/strategy/settings_agreement.h"

#include <nlohmann/json.hpp>

#include "common/json_depth.h"

namespace mirrored {

std::string SettingsJson(const std::vector<std::pair<std::string, std::string>>& settings) {
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& [name, value] : settings) mine.push_back({name, value});
  return mine.dump();
}

std::map<std::string, std::string> ParseSettingsJson(const std::string& text) {
  std::map<std::string, std::string> theirs;
  if (JsonNestingPastLimit(text)) return theirs;  // not what a peer's SettingsJson writes
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_array()) {
    for (const auto& pair : parsed)
      if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string())
        theirs[pair[0].get<std::string>()] = pair[1].get<std::string>();
  }
  return theirs;
}

std::string SettingsDifferences(const std::vector<std::pair<std::string, std::string>>& settings,
                                const std::vector<std::string>& tasks,
                                const std::vector<std::map<std::string, std::string>>& all) {
  std::string differences;
  for (const auto& [name, value] : settings) {
    bool same = true;
    for (const auto& theirs : all) {
      auto it = theirs.find(name);
      same = same && it != theirs.end() && it->second == value;
    }
    if (same) continue;
    differences += (differences.empty() ? "" : "; ") + name + " (";
    for (size_t i = 0; i < tasks.size(); ++i) {
      auto it = all[i].find(name);
      differences += (i ? ", " : "") + tasks[i] + " " + (it == all[i].end() ? "unset" : it->second);
    }
    differences += ")";
  }
  return differences;
}

}  // namespace mirrored
