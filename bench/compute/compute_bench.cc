// Single-replica training throughput (samples/s) and peak RSS for one model
// and batch size: Fashion-MNIST batches from the prefetcher, forward, loss,
// backward, Adam. Run one configuration per process so that peak RSS is the
// configuration's own; bench/compute/compare.sh runs the grid side by side
// with PyTorch.
//
//   compute_bench --model cnn --batch 64 --seconds 10 [--device cpu|gpu] [--precision fp32|bf16|...] [--data DIR]
//   # model batch device steps samples_per_sec peak_rss_mib cpu_ms_per_step
//
// cpu_ms_per_step is the process's CPU time (all threads, the prefetcher's
// included) over the timed steps: on a shared machine it moves far less
// with the load than samples/s, which counts the time spent waiting for a core.
#include <sys/resource.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "common/logging.h"
#include "worker/data/batch_prefetcher.h"
#include "worker/data/fashion_mnist.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"

using namespace mirrored;

namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("mirrored compute benchmark: single-replica training throughput");
  std::string model_name = "cnn", device = "cpu", precision_name = "fp32", data_dir = data::FashionMnist::kDefaultDir;
  int batch = 64, warmup = 5, epochs = 0, threads = 0;
  uint64_t seed = 1;
  double seconds = 10;
  bool header = false;
  app.add_option("--model", model_name, "mlp|cnn|resnet");
  app.add_option("--batch", batch, "batch size");
  app.add_option("--seconds", seconds, "timed duration after warm-up");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--device", device, "cpu|gpu");
  app.add_option("--precision", precision_name,
                 "fp32|bf16 (CPU, GPU), tf32 (GPU); fp16 here has no loss scaling (mirrored-worker has)");
  app.add_option("--data", data_dir, "Fashion-MNIST directory");
  app.add_flag("--header", header, "print the column header first");
  app.add_option("--epochs", epochs, "instead of timing: train this many epochs, print test accuracy");
  app.add_option("--seed", seed, "weights and shuffling seed");
  app.add_option("--threads", threads, "oneDNN threads (0: OpenMP default)");
  CLI11_PARSE(app, argc, argv);

  auto ds = data::FashionMnist::Load(data_dir);
  if (!ds.ok()) {
    MIRRORED_LOG(ERROR) << ds.status();
    return ExitCodeFor(ds.status());
  }
  auto precision = model::ParsePrecision(precision_name);
  if (!precision.ok()) {
    MIRRORED_LOG(ERROR) << precision.status();
    return ExitCodeFor(precision.status());
  }
  auto made = device == "gpu" ? model::MakeGpuBackend(0, *precision) : model::MakeCpuBackend(*precision);
  if (!made.ok()) {
    MIRRORED_LOG(ERROR) << made.status();
    return ExitCodeFor(made.status());
  }
  std::unique_ptr<model::Backend> backend = std::move(made).value();
  model::SetCpuThreadsForThisThread(threads);
  auto m = model::Model::Create(model_name, std::move(backend), seed);
  if (!m.ok()) {
    MIRRORED_LOG(ERROR) << m.status();
    return ExitCodeFor(m.status());
  }
  auto opt = model::Optimizer::Create("adam", 1e-3f);
  (*opt)->Bind(&(*m)->store(), &(*m)->backend());

  data::BatchPrefetcher input(&ds->train(), data::BatchSampler(ds->train().size(), batch, seed, true), 0, 1, {0, 0},
                              epochs > 0 ? uint64_t(epochs) : data::BatchPrefetcher::kForever);
  std::vector<float> weights(batch, 1.f / float(batch));
  auto step = [&]() -> bool {
    auto b = input.Next(std::chrono::seconds(60));
    if (!b.ok()) {
      MIRRORED_LOG(ERROR) << b.status();
      return false;
    }
    (*m)->Forward(int(b->size), b->images.data(), b->labels.data(), true);
    (*m)->Backward(weights.data(), {});
    (*opt)->Apply();
    return true;
  };
  if (epochs > 0) {
    auto t0 = std::chrono::steady_clock::now();
    const uint64_t steps = uint64_t(epochs) * (ds->train().size() / uint64_t(batch));
    for (uint64_t i = 0; i < steps; ++i)
      if (!step()) return 1;
    double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t correct = 0;
    const data::Dataset& test = ds->test();
    for (size_t begin = 0; begin < test.size(); begin += 500) {
      int n = int(std::min<size_t>(500, test.size() - begin));
      std::vector<int32_t> labels(static_cast<size_t>(n));
      std::vector<float> images(size_t(n) * test.example_size());
      test.Slice(begin, size_t(n), images.data(), labels.data());
      (*m)->Forward(n, images.data(), labels.data(), false);
      correct += (*m)->CorrectCount();
    }
    std::printf("%s epochs=%d batch=%d seed=%llu test_accuracy=%.4f train_seconds=%.1f\n", model_name.c_str(), epochs,
                batch, (unsigned long long)seed, double(correct) / double(test.size()), train_s);
    return 0;
  }
  for (int i = 0; i < warmup; ++i)
    if (!step()) return 1;
  (*m)->backend().Synchronize();
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  int steps = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    if (!step()) return 1;
    ++steps;
    (*m)->backend().Synchronize();
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double cpu_ms_per_step = (ProcessCpuSeconds() - cpu_start) * 1e3 / steps;
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  if (header) {
    std::printf("# %-8s %6s %-6s %7s %12s %12s %12s\n", "model", "batch", "device", "steps", "samples/s", "peak_MiB",
                "cpu_ms/step");
  }
  std::printf("  %-8s %6d %-6s %7d %12.1f %12.1f %12.3f\n", model_name.c_str(), batch, device.c_str(), steps,
              steps * double(batch) / elapsed, double(ru.ru_maxrss) / 1024.0, cpu_ms_per_step);
  return 0;
}
