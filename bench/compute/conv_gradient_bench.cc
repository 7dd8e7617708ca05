// The CPU convolution's kernel gradient two ways, interleaved in one
// process: oneDNN 2.6's backward-weights primitive and im2col + GEMM
// (cpu_im2col_weight_gradient.h), on the cnn's and resnet's layer shapes,
// batch 64. Times are the process's CPU time (the least of --repeats),
// which another process on the machine disturbs less than wall time; the
// ratio picks ConvWeightGradient::kFastestMeasured's rule.
//
//   conv_gradient_bench --threads 1 --repeats 15
//   # layer  onednn_ms  gemm_ms  onednn/gemm
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "worker/model/cpu_backend.h"
#include "worker/model/cpu_dnnl_kernels.h"

using namespace mirrored::model;

namespace {

struct Layer {
  const char* name;
  ConvSpec spec;
};

std::vector<Layer> Layers() {
  auto same = [](ConvSpec s) { return s.SamePadded(); };
  return {
      {"cnn/conv1", {.in_h = 28, .in_w = 28, .in_c = 1, .out_c = 32, .kernel = 3, .relu = true}},
      {"cnn/conv2", {.in_h = 13, .in_w = 13, .in_c = 32, .out_c = 64, .kernel = 3, .relu = true}},
      {"resnet/stem", same({.in_h = 28, .in_w = 28, .in_c = 1, .out_c = 32, .kernel = 3, .bias = false})},
      {"resnet/block1", same({.in_h = 28, .in_w = 28, .in_c = 32, .out_c = 32, .kernel = 3, .bias = false})},
      {"resnet/block2/s2",
       same({.in_h = 28, .in_w = 28, .in_c = 32, .out_c = 64, .kernel = 3, .stride = 2, .bias = false})},
      {"resnet/block2", same({.in_h = 14, .in_w = 14, .in_c = 64, .out_c = 64, .kernel = 3, .bias = false})},
      {"resnet/block3/s2",
       same({.in_h = 14, .in_w = 14, .in_c = 64, .out_c = 128, .kernel = 3, .stride = 2, .bias = false})},
      {"resnet/block3", same({.in_h = 7, .in_w = 7, .in_c = 128, .out_c = 128, .kernel = 3, .bias = false})},
  };
}

double CpuMs() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// The least CPU time of `repeats` weight-only backward calls of each way,
// the two alternating (after two untimed calls each).
void TimeLayer(const Layer& layer, int n, int repeats) {
  const ConvSpec& s = layer.spec;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto random = [&](size_t count) {
    std::vector<float> v(count);
    for (float& e : v) e = u(rng);
    return v;
  };
  const std::vector<float> x = random(size_t(n) * s.in_h * s.in_w * s.in_c),
                           w = random(size_t(s.kernel) * s.kernel * s.in_c * s.out_c),
                           dy = random(size_t(n) * s.out_h() * s.out_w() * s.out_c);
  std::vector<float> dw(w.size()), db(size_t(s.out_c));
  DnnlContext ctx;
  std::unique_ptr<ConvKernel> ways[2] = {MakeDnnlConv(&ctx, s, ConvWeightGradient::kOneDnn),
                                         MakeDnnlConv(&ctx, s, ConvWeightGradient::kIm2colGemm)};
  double best[2] = {1e300, 1e300};
  for (int r = -2; r < repeats; ++r)
    for (int i = 0; i < 2; ++i) {
      const double start = CpuMs();
      ways[i]->Backward(n, x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data());
      if (r >= 0) best[i] = std::min(best[i], CpuMs() - start);
    }
  std::printf("%-18s %10.3f %10.3f %12.2f\n", layer.name, best[0], best[1], best[0] / best[1]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("mirrored conv kernel-gradient benchmark: oneDNN's primitive against im2col + GEMM");
  int threads = 1, repeats = 15, batch = 64;
  app.add_option("--threads", threads, "OpenMP threads");
  app.add_option("--repeats", repeats, "timed calls of each way per layer");
  app.add_option("--batch", batch, "images per call");
  CLI11_PARSE(app, argc, argv);
  SetCpuThreadsForThisThread(threads);
  std::printf("# conv kernel gradient (no input gradient), batch %d, %d thread(s); least CPU ms of %d\n", batch,
              threads, repeats);
  std::printf("%-18s %10s %10s %12s\n", "layer", "onednn_ms", "gemm_ms", "onednn/gemm");
  for (const Layer& layer : Layers()) TimeLayer(layer, batch, repeats);
}
