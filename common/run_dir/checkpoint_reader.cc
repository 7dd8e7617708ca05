#include "common/run_dir/checkpoint_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/crc32c.h"
#include "common/logging.h"
#include "common/run_dir/checkpoint_index.h"

namespace mirrored {

StatusOr<std::vector<int64_t>> CheckpointReader::ListCheckpointSteps() {
  StatusOr<std::vector<std::string>> names = env_->ListDir(CheckpointsDir(run_dir_));
  if (!names.ok()) {
    if (names.status().code() == StatusCode::kNotFound) return std::vector<int64_t>{};
    return names.status();
  }
  std::vector<int64_t> steps;
  for (const std::string& name : *names) {
    if (std::optional<int64_t> step = ParseCheckpointDirName(name)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

StatusOr<CheckpointState> CheckpointReader::ReadState(const std::string& dir, int64_t step) {
  const std::string path = JoinPath(dir, kStateFileName);
  MIRRORED_ASSIGN_OR_RETURN(std::string text, env_->ReadFile(path));
  MIRRORED_ASSIGN_OR_RETURN(CheckpointState state, CheckpointState::FromJsonText(text, path));
  if (state.step != step) {
    return DataLossError(path + ": step " + std::to_string(state.step) +
                         " does not match the directory name " + CheckpointDirName(step));
  }
  return state;
}

Status CheckpointReader::InspectSafetensors(const std::string& path, const CheckpointState& state,
                                          const std::string& name) {
  MIRRORED_ASSIGN_OR_RETURN(uint64_t size, env_->GetFileSize(path));
  // The size state.json recorded when the file was written (checkpoints of
  // earlier versions record none): a truncated file, said in those terms.
  if (auto it = state.files.find(name); it != state.files.end() && it->second.bytes != size) {
    return DataLossError(path + " is damaged: " + std::to_string(size) + " bytes; written as " +
                         std::to_string(it->second.bytes) + (size < it->second.bytes ? " (truncated)" : ""));
  }
  MIRRORED_ASSIGN_OR_RETURN(std::string prefix, env_->ReadFilePrefix(path, 8));
  if (prefix.size() == 8) {
    uint64_t n = 0;
    std::memcpy(&n, prefix.data(), 8);
    // Read the header only when it fits; ValidateHeader reports it otherwise.
    if (n <= size - 8) {
      MIRRORED_ASSIGN_OR_RETURN(prefix, env_->ReadFilePrefix(path, 8 + n));
    }
  }
  return SafetensorsFile::ValidateHeader(prefix, size, path);
}

StatusOr<CheckpointInfo> CheckpointReader::Inspect(int64_t step) {
  CheckpointInfo info;
  info.step = step;
  info.dir = JoinPath(CheckpointsDir(run_dir_), CheckpointDirName(step));
  MIRRORED_ASSIGN_OR_RETURN(info.state, ReadState(info.dir, step));
  MIRRORED_RETURN_IF_ERROR(InspectSafetensors(JoinPath(info.dir, kModelFileName), info.state, kModelFileName));
  if (model_only_) return info;
  MIRRORED_RETURN_IF_ERROR(
      InspectSafetensors(JoinPath(info.dir, kOptimizerFileName), info.state, kOptimizerFileName));
  return info;
}

namespace {

// The bytes read match the size and CRC-32C state.json recorded when the
// file was written (checkpoints of earlier versions record none).
Status CheckDigest(const CheckpointState& state, const std::string& name, const std::string& bytes,
                   const std::string& path) {
  auto it = state.files.find(name);
  if (it == state.files.end()) return OkStatus();
  const uint32_t crc = Crc32c(bytes.data(), bytes.size());
  if (bytes.size() != it->second.bytes || crc != it->second.crc32c) {
    char detail[128];
    std::snprintf(detail, sizeof(detail), "%zu bytes, CRC-32C %08x; written as %llu bytes, %08x", bytes.size(), crc,
                  static_cast<unsigned long long>(it->second.bytes), it->second.crc32c);
    return DataLossError(path + " is damaged: " + detail);
  }
  return OkStatus();
}

}  // namespace

StatusOr<LoadedCheckpoint> CheckpointReader::Load(int64_t step) {
  return LoadDirectory(JoinPath(CheckpointsDir(run_dir_), CheckpointDirName(step)), step);
}

StatusOr<LoadedCheckpoint> CheckpointReader::LoadDirectory(const std::string& dir, int64_t step) {
  MIRRORED_ASSIGN_OR_RETURN(CheckpointState state, ReadState(dir, step));
  const std::string model_path = JoinPath(dir, kModelFileName);
  const std::string optimizer_path = JoinPath(dir, kOptimizerFileName);
  MIRRORED_ASSIGN_OR_RETURN(std::string model_bytes, env_->ReadFile(model_path));
  MIRRORED_RETURN_IF_ERROR(CheckDigest(state, kModelFileName, model_bytes, model_path));
  MIRRORED_ASSIGN_OR_RETURN(SafetensorsFile model,
                            SafetensorsFile::Parse(std::move(model_bytes), model_path));
  if (model_only_) return LoadedCheckpoint{CheckpointInfo{step, dir, std::move(state)}, std::move(model), {}};
  MIRRORED_ASSIGN_OR_RETURN(std::string optimizer_bytes, env_->ReadFile(optimizer_path));
  MIRRORED_RETURN_IF_ERROR(CheckDigest(state, kOptimizerFileName, optimizer_bytes, optimizer_path));
  MIRRORED_ASSIGN_OR_RETURN(SafetensorsFile optimizer,
                            SafetensorsFile::Parse(std::move(optimizer_bytes), optimizer_path));
  return LoadedCheckpoint{CheckpointInfo{step, dir, std::move(state)}, std::move(model),
                          std::move(optimizer)};
}

void CheckpointReader::CrossCheckIndex(int64_t chosen_step) {
  StatusOr<CheckpointIndex> index = CheckpointIndex::Read(env_, run_dir_);
  if (!index.ok()) {
    MIRRORED_LOG(WARNING) << "checkpoint index unusable (" << index.status() << "); using "
                          << CheckpointDirName(chosen_step) << " found by scanning";
    return;
  }
  if (index->latest != chosen_step) {
    MIRRORED_LOG(WARNING) << "checkpoint index names "
                          << (index->latest ? CheckpointDirName(*index->latest)
                                            : std::string("none"))
                          << " as latest but the latest complete checkpoint is "
                          << CheckpointDirName(chosen_step) << " (interrupted write or corruption)";
  }
}

StatusOr<LoadedCheckpoint> CheckpointReader::LoadLatest(IfAllDamaged if_all_damaged) {
  MIRRORED_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps());
  if (steps.empty()) return NotFoundError("no checkpoint in " + CheckpointsDir(run_dir_));
  Status latest_problem;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    StatusOr<LoadedCheckpoint> loaded = Load(*it);
    if (loaded.ok()) {
      CrossCheckIndex(*it);
      return loaded;
    }
    if (latest_problem.ok()) latest_problem = loaded.status();
    MIRRORED_LOG(WARNING) << "skipping checkpoint " << CheckpointDirName(*it) << " in "
                          << CheckpointsDir(run_dir_) << ": " << loaded.status()
                          << (it + 1 != steps.rend() ? "; trying the previous one" : "");
  }
  std::string names;
  for (int64_t step : steps) names += (names.empty() ? "" : ", ") + CheckpointDirName(step);
  const std::string what = "every checkpoint in " + CheckpointsDir(run_dir_) + " is damaged (" + names + ")";
  switch (if_all_damaged) {
    case IfAllDamaged::kStartOver:
      MIRRORED_LOG(WARNING) << what << "; --restart-from-scratch: training from step 0, replacing them";
      return NotFoundError(what);
    case IfAllDamaged::kReport:
      return InvalidArgumentError(what + "; the latest, " + CheckpointDirName(steps.back()) + ": " +
                                  latest_problem.message());
    case IfAllDamaged::kRefuse:
      break;
  }
  return InvalidArgumentError(what + ": not starting over, which would replace them (a failing disk or network "
                              "file system can make them unreadable for a while); check them, or pass "
                              "--restart-from-scratch to train from step 0");
}

StatusOr<std::vector<CheckpointInfo>> CheckpointReader::ListComplete(std::vector<Skipped>* skipped) {
  MIRRORED_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps());
  std::vector<CheckpointInfo> out;
  for (int64_t step : steps) {
    StatusOr<CheckpointInfo> info = Inspect(step);
    if (info.ok()) {
      out.push_back(std::move(*info));
    } else if (skipped != nullptr) {
      StatusOr<CheckpointState> state = ReadState(JoinPath(CheckpointsDir(run_dir_), CheckpointDirName(step)), step);
      skipped->push_back({step, info.status(), state.ok() ? std::optional<CheckpointState>(*state) : std::nullopt});
    } else {
      MIRRORED_LOG(WARNING) << "skipping checkpoint " << CheckpointDirName(step) << ": "
                            << info.status();
    }
  }
  return out;
}

StatusOr<std::optional<CheckpointInfo>> FindLatestCheckpoint(const std::string& run_dir,
                                                             FileEnv* env) {
  CheckpointReader reader(env, run_dir);
  StatusOr<LoadedCheckpoint> loaded = reader.LoadLatest();
  if (loaded.ok()) return std::optional<CheckpointInfo>(std::move(loaded->info));
  if (loaded.status().code() == StatusCode::kNotFound) return std::optional<CheckpointInfo>();
  return loaded.status();
}

StatusOr<std::vector<CheckpointInfo>> ListCompleteCheckpoints(const std::string& run_dir,
                                                              FileEnv* env) {
  return CheckpointReader(env, run_dir).ListComplete();
}

}  // namespace mirrored
