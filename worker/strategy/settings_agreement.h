// How the tasks of a job compare the settings they must agree on
// (MirroredStrategy::CheckTasksAgree): each publishes its own, as JSON, in
// the coordination service's key-value store, reads every task's back, and
// names each setting that differs with every task's value. Pure: no agent.
//
//   agent.KeyValueSet(prefix + task, SettingsJson(settings));                  // [["--lr","0.1"],...]
//   for (task : tasks) all.push_back(ParseSettingsJson(agent.KeyValueGet(prefix + task)));
//   std::string d = SettingsDifferences(settings, tasks, all);  // "--lr (worker:0 0.1, worker:1 0.2)"
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mirrored {

// [[name, value], ...] in the order given.
std::string SettingsJson(const std::vector<std::pair<std::string, std::string>>& settings);

// The settings of SettingsJson's text; entries that are not [string,
// string] pairs are skipped, and text that is no JSON array gives none.
std::map<std::string, std::string> ParseSettingsJson(const std::string& text);

// "" when every task in `all` (one map per task, in the order of `tasks`)
// has each of `settings` with the same value. Otherwise, for each setting
// that differs, in the order of `settings`, "<name> (<task> <value>, ...)"
// with "unset" for a task without it, joined by "; ".
std::string SettingsDifferences(const std::vector<std::pair<std::string, std::string>>& settings,
                                const std::vector<std::string>& tasks,
                                const std::vector<std::map<std::string, std::string>>& all);

}  // namespace mirrored
