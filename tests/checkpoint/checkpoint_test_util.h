// Helpers shared by the checkpoint tests: a scratch run directory that is
// removed afterwards, and a small model/optimizer whose values depend on
// the step so a loaded checkpoint can be matched to the one written.
//
//   ScratchDir dir;                                 // /tmp/mirrored-ckpt-XXXXXX
//   TestModel model(/*step=*/3);
//   ASSERT_TRUE(writer.Write(model.Contents()).ok());
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/run_dir/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"

namespace mirrored {

class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/mirrored-ckpt-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    char* made = mkdtemp(buf.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = made != nullptr ? made : "/nonexistent";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Weights, BatchNorm statistics and Adam slots of a tiny model; every value
// encodes the step, so a checkpoint read back names the step it came from.
class TestModel {
 public:
  explicit TestModel(int64_t step, int64_t scale = 1) : step_(step) {
    kernel_.resize(static_cast<size_t>(3 * 4 * scale));
    bias_.resize(4);
    moving_mean_.resize(4);
    for (size_t i = 0; i < kernel_.size(); ++i) kernel_[i] = static_cast<float>(step) + 0.001f * i;
    for (size_t i = 0; i < bias_.size(); ++i) bias_[i] = -static_cast<float>(step) - 0.5f * i;
    for (size_t i = 0; i < moving_mean_.size(); ++i) moving_mean_[i] = 0.25f * step;
    m_ = kernel_;
    for (float& v : m_) v *= 0.5f;
    v_ = kernel_;
    for (float& v : v_) v *= v;
    optimizer_step_ = step;
  }

  CheckpointContents Contents(bool final = false) const {
    CheckpointContents c;
    c.state.step = step_;
    c.state.epoch = step_ / 10;
    c.state.step_in_epoch = step_ % 10;
    c.state.seed = 42;
    c.state.data_seed = 7;
    c.state.world_size = 2;
    c.state.num_workers = 2;
    c.state.global_batch_size = 128;
    c.state.model = "test";
    c.state.optimizer = "adam";
    c.state.mirrored_version = "test";
    c.state.wall_time = 1.5e9;
    c.state.final = final;
    const int64_t rows = static_cast<int64_t>(kernel_.size()) / 4;
    c.model = {{"dense/kernel", DType::kF32, {rows, 4}, kernel_.data()},
               {"dense/bias", DType::kF32, {4}, bias_.data()},
               {"bn/moving_mean", DType::kF32, {4}, moving_mean_.data()}};
    c.optimizer = {{"dense/kernel/m", DType::kF32, {rows, 4}, m_.data()},
                   {"dense/kernel/v", DType::kF32, {rows, 4}, v_.data()},
                   {"step", DType::kI64, {}, &optimizer_step_}};
    return c;
  }

  // Checks `loaded` holds exactly this model's tensors and state.
  void ExpectMatches(const LoadedCheckpoint& loaded, bool final = false) const {
    EXPECT_EQ(loaded.info.step, step_);
    // The writer adds each data file's size and CRC-32C.
    EXPECT_EQ(loaded.info.state.files.size(), 2u);
    CheckpointState state = loaded.info.state;
    state.files.clear();
    EXPECT_EQ(state, Contents(final).state);
    EXPECT_EQ(loaded.model.tensors().size(), 3u);
    EXPECT_EQ(loaded.optimizer.tensors().size(), 3u);
    std::vector<float> kernel(kernel_.size());
    ASSERT_TRUE(
        loaded.model.CopyF32("dense/kernel", kernel.data(), static_cast<int64_t>(kernel.size()))
            .ok());
    EXPECT_EQ(kernel, kernel_);
    auto bias = loaded.model.ReadF32("dense/bias");
    ASSERT_TRUE(bias.ok()) << bias.status();
    EXPECT_EQ(*bias, bias_);
    auto v = loaded.optimizer.ReadF32("dense/kernel/v");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, v_);
    auto step = loaded.optimizer.ReadI64("step");
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(*step, std::vector<int64_t>{step_});
  }

 private:
  int64_t step_;
  std::vector<float> kernel_, bias_, moving_mean_, m_, v_;
  int64_t optimizer_step_ = 0;
};

}  // namespace mirrored
