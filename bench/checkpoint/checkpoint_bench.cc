// Checkpoint write time and size, synchronous vs asynchronous: for each
// model size, the weights plus two Adam slots (3x the weights on disk) are
// written with CheckpointWriter::Write (the training thread blocks for all
// of it) and with WriteAsync (it blocks only for the snapshot copy), then
// read back with CheckpointReader::LoadLatest.
//
//   checkpoint_bench                          # 1, 10, 100 MB of weights in $TMPDIR
//   checkpoint_bench --sizes-mb 0.9,45 --reps 5 --dir /scratch/run
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/run_dir/checkpoint_reader.h"
#include "mirrored/config.h"
#include "worker/checkpoint/checkpoint_writer.h"

using namespace mirrored;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#define BENCH_CHECK(expr)                                                                      \
  do {                                                                                         \
    ::mirrored::Status _s = (expr);                                                            \
    if (!_s.ok()) {                                                                            \
      std::fprintf(stderr, "checkpoint_bench: %s failed: %s\n", #expr, _s.ToString().c_str()); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("checkpoint write/read time and size, sync vs async");
  std::vector<double> sizes_mb = {1, 10, 100};
  int reps = 3;
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/mirrored-checkpoint-bench";
  app.add_option("--sizes-mb", sizes_mb, "weights per checkpoint, MB (1 MB = 2^20 bytes)")
      ->delimiter(',');
  app.add_option("--reps", reps, "writes per size and mode (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "scratch run directory (removed afterwards)");
  CLI11_PARSE(app, argc, argv);
  SetLogLevel(LogLevel::kWarning);

  std::printf("# mirrored %s checkpoint_bench: %u hardware threads, run dir %s\n", kVersion,
              std::thread::hardware_concurrency(), dir.c_str());
  std::printf(
      "# weights + Adam m + Adam v per checkpoint, F32; median of %d writes; every file fsynced\n",
      reps);
  std::printf("# %10s %12s %10s %10s %10s %10s %10s %10s\n", "weights_MB", "file_MB", "sync_s",
              "sync_MB/s", "stall_s", "async_s", "load_s", "load_MB/s");
  for (double mb : sizes_mb) {
    std::filesystem::remove_all(dir);
    const size_t count = static_cast<size_t>(mb * 1024 * 1024 / sizeof(float));
    // A few tensors, like a model's layers.
    const size_t parts = 4;
    std::vector<std::vector<float>> weights(parts), m(parts), v(parts);
    for (size_t p = 0; p < parts; ++p) {
      const size_t n = count / parts + (p == 0 ? count % parts : 0);
      weights[p].assign(n, 0.001f * static_cast<float>(p + 1));
      m[p].assign(n, 0.5f);
      v[p].assign(n, 0.25f);
    }
    int64_t step = 0;
    auto contents = [&]() {
      CheckpointContents c;
      c.state.step = ++step;
      c.state.model = "bench";
      c.state.optimizer = "adam";
      for (size_t p = 0; p < parts; ++p) {
        const std::string name = "layer" + std::to_string(p) + "/kernel";
        const int64_t n = static_cast<int64_t>(weights[p].size());
        c.model.push_back({name, DType::kF32, {n}, weights[p].data()});
        c.optimizer.push_back({name + "/m", DType::kF32, {n}, m[p].data()});
        c.optimizer.push_back({name + "/v", DType::kF32, {n}, v[p].data()});
      }
      return c;
    };
    CheckpointWriter writer(FileEnv::Default(), dir, {.keep_checkpoints = 2});
    std::vector<double> sync_s, stall_s, async_s, load_s;
    for (int r = 0; r < reps; ++r) {
      auto start = Clock::now();
      BENCH_CHECK(writer.Write(contents()));
      sync_s.push_back(Seconds(start));
    }
    for (int r = 0; r < reps; ++r) {
      CheckpointContents c = contents();
      auto start = Clock::now();
      BENCH_CHECK(writer.WriteAsync(c));
      stall_s.push_back(Seconds(start));
      BENCH_CHECK(writer.Wait());
      async_s.push_back(Seconds(start));
    }
    uint64_t file_bytes = 0;
    CheckpointReader reader(FileEnv::Default(), dir);
    for (int r = 0; r < reps; ++r) {
      auto start = Clock::now();
      StatusOr<LoadedCheckpoint> loaded = reader.LoadLatest();
      BENCH_CHECK(loaded.status());
      load_s.push_back(Seconds(start));
      file_bytes = 0;
      for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
        file_bytes += std::filesystem::file_size(loaded->info.dir + "/" + f);
      }
    }
    const double file_mb = static_cast<double>(file_bytes) / (1024 * 1024);
    std::printf("  %10.2f %12.2f %10.4f %10.1f %10.4f %10.4f %10.4f %10.1f\n", mb, file_mb,
                Median(sync_s), file_mb / Median(sync_s), Median(stall_s), Median(async_s),
                Median(load_s), file_mb / Median(load_s));
  }
  std::filesystem::remove_all(dir);
  std::printf("# stall_s: WriteAsync's return (snapshot copy); async_s: until Wait() returned\n");
  return 0;
}
