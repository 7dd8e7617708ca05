// Helper for safetensors_interop.py (not a test by itself):
//   checkpoint_interop_writer write RUN_DIR   writes ckpt-1234 with known tensors
//   checkpoint_interop_writer read FILE       prints FILE's tensors as JSON (one object)
// The known tensors' values are formulas the Python side recomputes.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/run_dir/posix_file_env.h"
#include "worker/checkpoint/checkpoint_writer.h"

using namespace mirrored;

namespace {

int Write(const std::string& run_dir) {
  std::vector<float> kernel(3 * 4), var(4), m(2 * 3 * 2);
  for (size_t i = 0; i < kernel.size(); ++i) kernel[i] = 0.5f * static_cast<float>(i) - 1.0f;
  for (size_t i = 0; i < var.size(); ++i) var[i] = 1.0f / static_cast<float>(i + 1);
  for (size_t i = 0; i < m.size(); ++i) m[i] = -0.25f * static_cast<float>(i);
  const float scalar = 3.25f;
  const int64_t step = 1234;
  const std::vector<int64_t> big = {-(1LL << 40), 0, (1LL << 53) + 1};
  CheckpointContents c;
  c.state.step = 1234;
  c.state.epoch = 3;
  c.state.step_in_epoch = 17;
  c.state.world_size = 2;
  c.state.model = "interop";
  c.state.optimizer = "adam";
  c.state.final = true;
  c.model = {{"dense/kernel", DType::kF32, {3, 4}, kernel.data()},
             {"bn/moving_variance", DType::kF32, {4}, var.data()},
             {"empty", DType::kF32, {0, 5}, nullptr},
             {"scalar", DType::kF32, {}, &scalar}};
  c.optimizer = {{"dense/kernel/m", DType::kF32, {2, 3, 2}, m.data()},
                 {"step", DType::kI64, {}, &step},
                 {"big", DType::kI64, {3}, big.data()}};
  CheckpointWriter writer(FileEnv::Default(), run_dir);
  Status s = writer.Write(c);
  if (!s.ok()) {
    std::cerr << "interop writer: " << s << "\n";
    return 1;
  }
  return 0;
}

int Read(const std::string& path) {
  StatusOr<std::string> bytes = FileEnv::Default()->ReadFile(path);
  if (!bytes.ok()) {
    std::cerr << bytes.status() << "\n";
    return 1;
  }
  StatusOr<SafetensorsFile> file = SafetensorsFile::Parse(std::move(*bytes), path);
  if (!file.ok()) {
    std::cerr << file.status() << "\n";
    return 1;
  }
  nlohmann::json out = nlohmann::json::object();
  for (const TensorInfo& t : file->tensors()) {
    nlohmann::json values;
    if (t.dtype == DType::kF32) {
      values = *file->ReadF32(t.name);
    } else {
      values = *file->ReadI64(t.name);
    }
    out[t.name] = {
        {"dtype", std::string(DTypeName(t.dtype))}, {"shape", t.shape}, {"values", values}};
  }
  out["__metadata__"] = file->metadata();
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "write") == 0) return Write(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "read") == 0) return Read(argv[2]);
  std::cerr << "usage: " << argv[0] << " write RUN_DIR | read FILE\n";
  return 2;
}
