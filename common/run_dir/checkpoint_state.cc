#include "common/run_dir/checkpoint_state.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "common/crc32c.h"
#include "common/json_depth.h"

namespace mirrored {

nlohmann::json CheckpointState::ToJson() const {
  nlohmann::json json{
      {"format_version", kFormatVersion},
      {"step", step},
      {"epoch", epoch},
      {"step_in_epoch", step_in_epoch},
      {"seed", seed},
      {"data_seed", data_seed},
      {"world_size", world_size},
      {"num_workers", num_workers},
      {"global_batch_size", global_batch_size},
      {"model", model},
      {"optimizer", optimizer},
      {"final", final},
      {"mirrored_version", mirrored_version},
      {"wall_time", wall_time},
  };
  if (!precision.empty()) json["precision"] = precision;
  if (!data_shape.empty()) json["data_shape"] = data_shape;
  if (classes > 0) json["classes"] = classes;
  if (!loss.empty()) json["loss"] = loss;
  if (!model_json.is_null()) json["model_json"] = model_json;
  if (loss_scale > 0) {
    json["loss_scale"] = loss_scale;
    json["loss_scale_good_steps"] = loss_scale_good_steps;
  }
  if (!files.empty()) {
    nlohmann::json digests = nlohmann::json::object();
    char hex[9];
    for (const auto& [name, d] : files) {
      std::snprintf(hex, sizeof(hex), "%08x", d.crc32c);
      digests[name] = {{"bytes", d.bytes}, {"crc32c", hex}};
    }
    json["files"] = std::move(digests);
  }
  return json;
}

Status CheckpointState::Validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgumentError("checkpoint state: " + field + " " + why);
  };
  if (step < 0) return bad("step", "is negative (" + std::to_string(step) + ")");
  if (epoch < 0) return bad("epoch", "is negative (" + std::to_string(epoch) + ")");
  if (step_in_epoch < 0) return bad("step_in_epoch", "is negative");
  // Every epoch takes at least one step, so neither can pass the step.
  if (epoch > step) return bad("epoch", std::to_string(epoch) + " is past step " + std::to_string(step));
  if (step_in_epoch > step) {
    return bad("step_in_epoch", std::to_string(step_in_epoch) + " is past step " + std::to_string(step));
  }
  if (world_size < 1) return bad("world_size", "must be at least 1");
  if (num_workers < 1) return bad("num_workers", "must be at least 1");
  if (global_batch_size < 0) return bad("global_batch_size", "is negative");
  if (model.empty()) return bad("model", "is empty");
  if (!data_shape.empty() && (data_shape.size() != 3 || data_shape[0] < 1 || data_shape[1] < 1 || data_shape[2] < 1)) {
    return bad("data_shape", "is not [height, width, channels] of positive sizes");
  }
  if (classes < 0) return bad("classes", "is negative");
  if (!(loss_scale >= 0) || loss_scale > 3.4e38) return bad("loss_scale", "is not a finite non-negative number");
  if (loss_scale_good_steps < 0) return bad("loss_scale_good_steps", "is negative");
  return OkStatus();
}

namespace {

// state.json's "files": each file's size and CRC-32C; what is wrong with
// it, if anything.
std::optional<std::string> ReadFileDigests(const nlohmann::json& files,
                                           std::map<std::string, CheckpointState::FileDigest>& out) {
  if (!files.is_object()) return "\"files\" is not an object";
  for (const auto& [name, d] : files.items()) {
    const auto bytes = d.find("bytes");
    const auto crc = d.find("crc32c");
    if (!d.is_object() || bytes == d.end() || !bytes->is_number_unsigned() || crc == d.end() || !crc->is_string() ||
        crc->get<std::string>().size() != 8 ||
        crc->get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos) {
      return "\"files\"." + name + " is not {\"bytes\": <size>, \"crc32c\": \"<8 hex digits>\"}";
    }
    out[name] = {bytes->get<uint64_t>(), static_cast<uint32_t>(std::stoul(crc->get<std::string>(), nullptr, 16))};
  }
  return std::nullopt;
}

}  // namespace

StatusOr<CheckpointState> CheckpointState::FromJson(const nlohmann::json& json,
                                                    const std::string& file_name) {
  auto fail = [&](const std::string& what) { return DataLossError(file_name + ": " + what); };
  if (!json.is_object()) return fail("not a JSON object");
  CheckpointState s;
  auto get_int = [&](const char* key, int64_t* out, bool required) -> Status {
    auto it = json.find(key);
    if (it == json.end())
      return required ? fail(std::string("missing \"") + key + "\"") : OkStatus();
    if (!it->is_number_integer()) return fail(std::string("\"") + key + "\" is not an integer");
    *out = it->get<int64_t>();
    return OkStatus();
  };
  auto get_string = [&](const char* key, std::string* out, bool required) -> Status {
    auto it = json.find(key);
    if (it == json.end())
      return required ? fail(std::string("missing \"") + key + "\"") : OkStatus();
    if (!it->is_string()) return fail(std::string("\"") + key + "\" is not a string");
    *out = it->get<std::string>();
    return OkStatus();
  };
  int64_t version = 0;
  MIRRORED_RETURN_IF_ERROR(get_int("format_version", &version, true));
  if (version < 1 || version > kFormatVersion) {
    return fail("format_version " + std::to_string(version) +
                " is not supported (this build reads 1.." + std::to_string(kFormatVersion) + ")");
  }
  MIRRORED_RETURN_IF_ERROR(get_int("step", &s.step, true));
  MIRRORED_RETURN_IF_ERROR(get_int("epoch", &s.epoch, true));
  MIRRORED_RETURN_IF_ERROR(get_int("step_in_epoch", &s.step_in_epoch, true));
  MIRRORED_RETURN_IF_ERROR(get_int("seed", &s.seed, false));
  MIRRORED_RETURN_IF_ERROR(get_int("data_seed", &s.data_seed, false));
  MIRRORED_RETURN_IF_ERROR(get_int("world_size", &s.world_size, true));
  MIRRORED_RETURN_IF_ERROR(get_int("num_workers", &s.num_workers, false));
  MIRRORED_RETURN_IF_ERROR(get_int("global_batch_size", &s.global_batch_size, false));
  MIRRORED_RETURN_IF_ERROR(get_string("model", &s.model, true));
  MIRRORED_RETURN_IF_ERROR(get_string("optimizer", &s.optimizer, false));
  if (auto it = json.find("model_json"); it != json.end()) {
    if (!it->is_object()) return fail("\"model_json\" is not a JSON object (a Keras model)");
    s.model_json = *it;
  }
  MIRRORED_RETURN_IF_ERROR(get_string("mirrored_version", &s.mirrored_version, false));
  MIRRORED_RETURN_IF_ERROR(get_string("precision", &s.precision, false));
  MIRRORED_RETURN_IF_ERROR(get_int("loss_scale_good_steps", &s.loss_scale_good_steps, false));
  MIRRORED_RETURN_IF_ERROR(get_int("classes", &s.classes, false));
  MIRRORED_RETURN_IF_ERROR(get_string("loss", &s.loss, false));
  if (auto it = json.find("data_shape"); it != json.end()) {
    if (!it->is_array() || !std::all_of(it->begin(), it->end(), [](const auto& v) { return v.is_number_integer(); })) {
      return fail("\"data_shape\" is not an array of integers");
    }
    s.data_shape = it->get<std::vector<int64_t>>();
  }
  if (auto it = json.find("loss_scale"); it != json.end()) {
    if (!it->is_number()) return fail("\"loss_scale\" is not a number");
    s.loss_scale = it->get<double>();
  }
  auto final_it = json.find("final");
  if (final_it == json.end() || !final_it->is_boolean())
    return fail("missing or non-boolean \"final\"");
  s.final = final_it->get<bool>();
  if (auto files_it = json.find("files"); files_it != json.end()) {
    if (std::optional<std::string> bad = ReadFileDigests(*files_it, s.files)) return fail(*bad);
  }
  auto time_it = json.find("wall_time");
  if (time_it != json.end()) {
    if (!time_it->is_number()) return fail("\"wall_time\" is not a number");
    s.wall_time = time_it->get<double>();
  }
  Status valid = s.Validate();
  if (!valid.ok()) return fail(valid.message());
  return s;
}

namespace {

// CRC-32C of the state without its own checksum, as compact JSON: object
// keys sorted, numbers in their shortest exact form, so the value read
// back hashes to what was written.
uint32_t StateCrc(const nlohmann::json& without_crc) {
  const std::string canonical = without_crc.dump();
  return Crc32c(canonical.data(), canonical.size());
}

}  // namespace

std::string CheckpointState::ToJsonText() const {
  nlohmann::json json = ToJson();
  json[kStateCrcKey] = StateCrc(json);
  return json.dump(2) + "\n";
}

StatusOr<CheckpointState> CheckpointState::FromJsonText(std::string_view text,
                                                        const std::string& file_name) {
  if (auto at = JsonNestingPastLimit(text)) return DataLossError(file_name + ": " + JsonTooDeepMessage(*at));
  nlohmann::json json = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (json.is_discarded()) return DataLossError(file_name + ": not valid JSON");
  if (json.is_object() && json.contains(kStateCrcKey)) {  // absent before 2026-11-27
    const nlohmann::json recorded = json[kStateCrcKey];
    json.erase(kStateCrcKey);
    if (!recorded.is_number_unsigned() || recorded.get<uint64_t>() != StateCrc(json)) {
      char detail[96];
      if (recorded.is_number_unsigned()) {
        std::snprintf(detail, sizeof detail, "CRC-32C %08x, not the %08llx", StateCrc(json),
                      static_cast<unsigned long long>(recorded.get<uint64_t>()));
      } else {
        std::snprintf(detail, sizeof detail, "CRC-32C %08x, not a number", StateCrc(json));
      }
      return DataLossError(file_name + " is damaged: its content has " + detail +
                           " it was written with (a byte changed after it was written)");
    }
  }
  return FromJson(json, file_name);
}

}  // namespace mirrored
