// What the GPU training tests share (label `gpu`): the data directory and a
// fixture that skips without a CUDA device (fails under
// MIRRORED_REQUIRE_GPU), fails when a GPU is there but the data is not, and
// gives each test a fresh run root, kept when the test failed.
//
//   class MyGpuTest : public GpuTrainTest {};
//   TEST_F(MyGpuTest, X) { o.data_dir = DataDir(); o.run_dir = (run_root_ / "run").string(); }
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/util/gpu_test_util.h"
#include "worker/data/fashion_mnist.h"
#include "worker/strategy/device_choice.h"

namespace mirrored {

// MIRRORED_DATA_DIR (the pack's run wrapper sets it), else Debian's location.
inline std::string DataDir() {
  const char* dir = std::getenv("MIRRORED_DATA_DIR");
  return dir != nullptr ? dir : data::FashionMnist::kDefaultDir;
}

class GpuTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuProbe probe = ProbeGpus();
    MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(probe.count, probe.error);
    ASSERT_TRUE(std::filesystem::exists(DataDir() + "/train-images-idx3-ubyte.gz"))
        << "a GPU is visible but Fashion-MNIST is not in " << DataDir() << " (set MIRRORED_DATA_DIR)";
    run_root_ = std::filesystem::temp_directory_path() /
                ("mirrored-gpu-train-" + std::to_string(getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(run_root_);
    std::filesystem::create_directories(run_root_);
  }
  void TearDown() override {
    if (!run_root_.empty() && !HasFailure()) std::filesystem::remove_all(run_root_);
  }
  std::filesystem::path run_root_;
};

}  // namespace mirrored
