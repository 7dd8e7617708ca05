#include "common/cluster/tf_config_parser.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/quoted_text.h"

namespace mirrored {
namespace {

using nlohmann::json;

// "string \"abc\"", "number 2222", "object": how a wrong value is shown.
std::string Describe(const json& value) {
  if (value.is_object() || value.is_array() || value.is_null()) return value.type_name();
  std::string dumped = value.dump();
  if (dumped.size() > 60) dumped = dumped.substr(0, 57) + "...";
  return std::string(value.type_name()) + " " + dumped;
}

std::string Quote(std::string_view s) { return QuotedText(s); }

// nlohmann reports the number of bytes read when the error was found; the
// offending character is the last of them. Lines and columns count from 1.
std::string LineAndColumn(std::string_view text, size_t bytes_read) {
  const size_t pos = bytes_read == 0 ? 0 : std::min(bytes_read - 1, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(pos - line_start + 1);
}

// The human part of nlohmann's what(): after "parse error ...: ".
std::string ParseErrorReason(const json::parse_error& e) {
  std::string what = e.what();
  const size_t at = what.find("parse error");
  if (at != std::string::npos) {
    const size_t colon = what.find(": ", at);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  return what;
}

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// What Python's int() makes of a str, as TensorFlow applies it to
// task.index and to the keys of a job given as a map: blanks (space, \t, \n,
// \r, \f, \v) around, an optional sign, ASCII digits with single
// underscores between them ("1_0" is 10, as in Python). nullopt where int()
// raises, and for the Unicode digits and spaces int() would also take. A
// magnitude past kMaxTaskIndex comes back as kMaxTaskIndex + 1, so no text
// overflows and the caller can name the limit.
std::optional<long long> IntOfIndexText(std::string_view text) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
  long long value = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      if (text[i - 1] == '_') return std::nullopt;  // i > 0: text does not start with '_'
    } else if (c >= '0' && c <= '9') {
      value = std::min(value * 10 + (c - '0'), kMaxTaskIndex + 1);
    } else {
      return std::nullopt;
    }
  }
  return negative ? -value : value;
}

StatusOr<HostPort> ParseAddress(const std::string& job, long long index, const json& value) {
  const std::string field = "cluster." + job + "[" + std::to_string(index) + "]";
  if (!value.is_string()) {
    return InvalidArgumentError(field + " must be a \"host:port\" string, got " + Describe(value));
  }
  const std::string& text = value.get_ref<const std::string&>();
  StatusOr<HostPort> address = HostPort::Parse(text);
  if (!address.ok()) return InvalidArgumentError(field + " " + Quote(text) + ": " + address.status().message());
  return address;
}

// The index a key of a job map names, as TensorFlow's int(key).
StatusOr<long long> JobMapKeyIndex(const std::string& job, const std::string& key) {
  const std::optional<long long> index = IntOfIndexText(key);
  if (!index || *index < 0) {
    return InvalidArgumentError("cluster." + job + ": key " + Quote(key) +
                                " is not a task index (a job given as a map needs the keys 0..N-1)");
  }
  if (*index > kMaxTaskIndex) {
    return InvalidArgumentError("cluster." + job + ": key " + Quote(key) + " is above the limit of " +
                                std::to_string(kMaxTaskIndex) + " (a job has at most that many tasks of a type)");
  }
  return *index;
}

// "0, 2, 5", shortened in the middle past a dozen.
std::string ListIndices(const std::map<long long, std::string>& keys) {
  constexpr size_t kShown = 12;
  std::string out;
  size_t n = 0;
  for (const auto& [index, key] : keys) {
    ++n;
    if (keys.size() > kShown && n == kShown) {
      out += ", ...";
      continue;
    }
    if (keys.size() > kShown && n > kShown && n < keys.size()) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(index);
  }
  return out;
}

// A job given as {"<index>": "host:port"} (TF's ClusterSpec takes a dict
// job and reads each key with int()). TF also takes a sparse map; we need
// the indices 0..N-1 exactly, in any order, because ranks and the chief
// follow from them. Two keys naming one index ("1" and "01"), which TF
// settles silently by keeping the later, are refused.
StatusOr<std::vector<HostPort>> ParseJobMap(const std::string& job, const json& tasks) {
  if (tasks.empty()) return InvalidArgumentError("cluster." + job + " is an empty map: give at least one address");
  std::map<long long, std::string> keys;  // index -> the key as written
  for (const auto& item : tasks.items()) {
    MIRRORED_ASSIGN_OR_RETURN(const long long index, JobMapKeyIndex(job, item.key()));
    auto [it, inserted] = keys.emplace(index, item.key());
    if (!inserted) {
      return InvalidArgumentError("cluster." + job + ": keys " + Quote(it->second) + " and " + Quote(item.key()) +
                                  " both name task index " + std::to_string(index));
    }
  }
  long long expected = 0;
  for (const auto& entry : keys) {
    if (entry.first != expected) {
      return InvalidArgumentError("cluster." + job + ": task index " + std::to_string(expected) +
                                  " is missing (TF_CONFIG gives " + ListIndices(keys) +
                                  "; mirrored needs the indices 0..N-1)");
    }
    ++expected;
  }
  std::vector<HostPort> addresses;
  for (const auto& [index, key] : keys) {
    MIRRORED_ASSIGN_OR_RETURN(HostPort address, ParseAddress(job, index, tasks.at(key)));
    addresses.push_back(std::move(address));
  }
  return addresses;
}

StatusOr<std::vector<HostPort>> ParseJob(const std::string& job, const json& tasks) {
  if (tasks.is_object()) return ParseJobMap(job, tasks);
  if (!tasks.is_array()) {
    return InvalidArgumentError("cluster." + job +
                                " must be a list of \"host:port\" strings (or a map of index to \"host:port\"), got " +
                                Describe(tasks));
  }
  std::vector<HostPort> addresses;
  for (size_t i = 0; i < tasks.size(); ++i) {
    MIRRORED_ASSIGN_OR_RETURN(HostPort address, ParseAddress(job, static_cast<long long>(i), tasks[i]));
    addresses.push_back(std::move(address));
  }
  return addresses;
}

StatusOr<ClusterSpec::JobMap> ParseCluster(const json& cluster) {
  if (!cluster.is_object()) {
    return InvalidArgumentError("cluster must be an object of job name -> list of \"host:port\", got " +
                                Describe(cluster));
  }
  ClusterSpec::JobMap jobs;
  for (const auto& [job, tasks] : cluster.items()) {
    MIRRORED_RETURN_IF_ERROR(ClusterSpec::ValidateJobName(job));
    MIRRORED_ASSIGN_OR_RETURN(jobs[job], ParseJob(job, tasks));
  }
  return jobs;
}

// task.index as TensorFlow's int(task["index"]): an integer, also written
// 1.0 or as a string IntOfIndexText takes ("1", " +1 "). A fraction is
// refused, not truncated as int(1.5) would; so are true and false.
StatusOr<int> ParseTaskIndex(const json& index) {
  constexpr long long kPastLimit = kMaxTaskIndex + 1;
  std::optional<long long> value;
  if (index.is_number_unsigned()) {
    value = static_cast<long long>(std::min<uint64_t>(index.get<uint64_t>(), kPastLimit));
  } else if (index.is_number_integer()) {
    value = index.get<long long>();
  } else if (index.is_number_float()) {
    const double d = index.get<double>();
    if (std::isfinite(d) && d == std::floor(d)) {
      value = static_cast<long long>(std::clamp(d, -static_cast<double>(kPastLimit), static_cast<double>(kPastLimit)));
    }
  } else if (index.is_string()) {
    value = IntOfIndexText(index.get_ref<const std::string&>());
  }
  const std::string shown = index.is_string() ? Describe(index) : index.dump();
  if (!value || *value < 0) return InvalidArgumentError("task.index " + shown + " must be a non-negative integer");
  if (*value > kMaxTaskIndex) {
    return InvalidArgumentError("task.index " + shown + " is above the limit of " + std::to_string(kMaxTaskIndex) +
                                " (a job has at most that many tasks of a type)");
  }
  return static_cast<int>(*value);
}

StatusOr<TaskId> ParseTask(const json& task, bool has_cluster, std::vector<std::string>* warnings) {
  if (!task.is_object()) {
    return InvalidArgumentError("task must be an object like {\"type\": \"worker\", \"index\": 0}, got " +
                                Describe(task));
  }
  TaskId id{std::string(kWorkerJob), 0};
  if (!task.contains("type")) {
    if (has_cluster) {
      return InvalidArgumentError(
          "task.type is missing: with a cluster, TF_CONFIG must say which task this process is, "
          "e.g. \"task\": {\"type\": \"worker\", \"index\": 0}");
    }
  } else {
    const json& type = task.at("type");
    if (!type.is_string()) {
      return InvalidArgumentError("task.type must be a string, got " + Describe(type));
    }
    id.type = type.get<std::string>();
    if (id.type == kParameterServerJob) {
      return InvalidArgumentError(
          "task.type \"ps\": parameter-server training is not supported; use chief, worker or "
          "evaluator");
    }
    if (id.type != kChiefJob && id.type != kWorkerJob && id.type != kEvaluatorJob) {
      return InvalidArgumentError("task.type " + Quote(id.type) +
                                  " is not supported: use chief, worker or evaluator");
    }
  }
  if (!task.contains("index") && has_cluster) {
    // TF leaves the index None here and MultiWorkerMirroredStrategy then
    // fails; defaulting to 0 would let two processes both claim task 0.
    return InvalidArgumentError("task.index is missing: with a cluster, TF_CONFIG must say which " +
                                id.type + " this process is, e.g. \"task\": {\"type\": \"" +
                                id.type + "\", \"index\": 0}");
  }
  if (task.contains("index")) {
    MIRRORED_ASSIGN_OR_RETURN(id.index, ParseTaskIndex(task.at("index")));
  }
  for (const auto& [key, value] : task.items()) {
    if (key != "type" && key != "index") {
      warnings->push_back("TF_CONFIG has unknown key \"task." + key + "\"; it is ignored");
    }
  }
  return id;
}

Status CheckTaskInCluster(const TaskId& task, const ClusterSpec& cluster) {
  const int n = cluster.NumTasks(task.type);
  if (n == 0) {
    if (task.type == kEvaluatorJob) {  // the evaluator may be left out of the cluster
      if (task.index != 0) {
        return InvalidArgumentError("task.index " + std::to_string(task.index) +
                                    " is out of range: there is at most one evaluator, so its index is 0");
      }
      return OkStatus();
    }
    return InvalidArgumentError("task.type " + Quote(task.type) +
                                " is not in the cluster: cluster has no \"" + task.type + "\" job");
  }
  if (task.index >= n) {
    return InvalidArgumentError("task.index " + std::to_string(task.index) +
                                " is out of range: job \"" + task.type + "\" has " +
                                std::to_string(n) + (n == 1 ? " task" : " tasks"));
  }
  return OkStatus();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("--tf-config file " + Quote(path) + " is a directory: give a JSON file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) {
      return NotFoundError("--tf-config " + Quote(path) +
                           ": no such file (a JSON value must start with \"{\")");
    }
    return InvalidArgumentError("--tf-config file " + Quote(path) + ": cannot read it: " +
                                std::strerror(err));
  }
  // Bounded: /dev/zero or a huge file given by mistake must not eat memory.
  std::string contents(kMaxTfConfigBytes + 1, '\0');
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (in.bad()) {
    return InvalidArgumentError("--tf-config file " + Quote(path) + ": read failed");
  }
  contents.resize(static_cast<size_t>(in.gcount()));
  if (contents.size() > kMaxTfConfigBytes) {
    return InvalidArgumentError("--tf-config file " + Quote(path) + " is larger than " +
                                std::to_string(kMaxTfConfigBytes >> 20) + " MiB: that is not a TF_CONFIG");
  }
  return contents;
}

}  // namespace

ClusterConfig SingleLocalTaskConfig(std::string source) {
  ClusterConfig config;
  config.is_single_local_task = true;
  config.source = std::move(source);
  return config;
}

StatusOr<ClusterConfig> ParseTfConfig(std::string_view text, std::string source) {
  if (IsBlank(text)) return SingleLocalTaskConfig(std::move(source));
  // nlohmann stops at a NUL as at the end of the input, so what follows it
  // would be silently ignored.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return InvalidArgumentError("not valid JSON: a NUL byte at offset " + std::to_string(nul) + " (" +
                                LineAndColumn(text, nul + 1) + ")");
  }
  if (auto at = JsonNestingPastLimit(text)) {
    return InvalidArgumentError("not valid TF_CONFIG: it " + JsonTooDeepMessage(*at));
  }
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return InvalidArgumentError("not valid JSON: " + LineAndColumn(text, e.byte) +
                                ": " + ParseErrorReason(e));
  } catch (const json::exception& e) {  // out_of_range.406: a number such as 1e400 overflows a double
    return InvalidArgumentError(std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) {
    return InvalidArgumentError("TF_CONFIG must be a JSON object, got " + Describe(doc));
  }

  ClusterConfig config;
  config.source = std::move(source);
  for (const auto& [key, value] : doc.items()) {
    if (key != "cluster" && key != "task" && key != "rpc_layer" && key != "environment") {
      config.warnings.push_back("TF_CONFIG has unknown key \"" + key + "\"; it is ignored");
    }
  }

  ClusterSpec::JobMap jobs;
  if (doc.contains("cluster")) {
    MIRRORED_ASSIGN_OR_RETURN(jobs, ParseCluster(doc.at("cluster")));
  }
  const bool has_cluster = !jobs.empty();
  MIRRORED_ASSIGN_OR_RETURN(config.cluster, ClusterSpec::Create(std::move(jobs)));

  if (doc.contains("task")) {
    std::vector<std::string> task_warnings;
    MIRRORED_ASSIGN_OR_RETURN(config.task, ParseTask(doc.at("task"), has_cluster, &task_warnings));
    config.warnings.insert(config.warnings.end(), task_warnings.begin(), task_warnings.end());
  } else if (has_cluster) {
    return InvalidArgumentError(
        "task is missing: with a cluster, TF_CONFIG must say which task this process is, e.g. "
        "\"task\": {\"type\": \"worker\", \"index\": 0}");
  }

  if (has_cluster) {
    MIRRORED_RETURN_IF_ERROR(CheckTaskInCluster(config.task, config.cluster));
  } else {
    config.is_single_local_task = true;
    if (config.task.index != 0) {
      return InvalidArgumentError("task.index " + std::to_string(config.task.index) +
                                  " is out of range: TF_CONFIG has no cluster, so this process is "
                                  "the only task and its index is 0");
    }
  }

  if (doc.contains("rpc_layer")) {
    const json& rpc = doc.at("rpc_layer");
    if (!rpc.is_string()) {
      return InvalidArgumentError("rpc_layer must be a string, got " + Describe(rpc));
    }
    if (rpc.get<std::string>() != "grpc") {
      return InvalidArgumentError("rpc_layer " + Quote(rpc.get<std::string>()) +
                                  " is not supported: only \"grpc\" is");
    }
  }
  if (doc.contains("environment")) {
    const json& environment = doc.at("environment");
    if (!environment.is_string()) {
      return InvalidArgumentError("environment must be a string, got " + Describe(environment));
    }
    config.environment = environment.get<std::string>();
  }
  return config;
}

StatusOr<ClusterConfig> ResolveTfConfig(const std::optional<std::string>& flag_value,
                                        const EnvironmentMap& env) {
  if (flag_value.has_value()) {
    const std::string& value = *flag_value;
    const size_t first = value.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && value[first] == '{') {
      StatusOr<ClusterConfig> parsed = ParseTfConfig(value, "--tf-config JSON");
      if (!parsed.ok()) return parsed.status().WithContext("--tf-config JSON");
      return parsed;
    }
    if (value.empty()) {
      return InvalidArgumentError("--tf-config is empty: give a file or a JSON object");
    }
    MIRRORED_ASSIGN_OR_RETURN(std::string contents, ReadWholeFile(value));
    const std::string origin = "--tf-config file " + Quote(value);
    if (IsBlank(contents)) return InvalidArgumentError(origin + " is empty");
    StatusOr<ClusterConfig> parsed = ParseTfConfig(contents, origin);
    if (!parsed.ok()) return parsed.status().WithContext(origin);
    return parsed;
  }
  std::optional<std::string> from_env = Lookup(env, "TF_CONFIG");
  if (!from_env.has_value() || IsBlank(*from_env)) {
    return SingleLocalTaskConfig("no TF_CONFIG");
  }
  StatusOr<ClusterConfig> parsed = ParseTfConfig(*from_env, "TF_CONFIG environment variable");
  if (!parsed.ok()) return parsed.status().WithContext("TF_CONFIG environment variable");
  return parsed;
}

StatusOr<ClusterConfig> ResolveTfConfig(const std::optional<std::string>& flag_value) {
  return ResolveTfConfig(flag_value, ProcessEnvironment());
}

}  // namespace mirrored
