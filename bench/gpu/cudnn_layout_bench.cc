// cuDNN FP32 (FMA math, no TF32) timings of the `resnet` model's
// convolution and batch-norm shapes at one batch size, NHWC against NCHW
// (PyTorch's default, and mirrored's GPU backend's since 2026-11-27), with the
// algorithm cuDNN's heuristics rank first (what CudnnConv picks) and the
// fastest one cudnnFind measures. Batch norm: the legacy spatial kernels, and
// SPATIAL_PERSISTENT, against mirrored's own kernels in both layouts
// (worker/model/gpu_batch_norm.cu). A table; the question it answers is where resnet's GPU
// step time goes and which layout/algorithm choice would win it back.
//
//   cudnn_layout_bench [--batch 256] [--reps 20]
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "worker/model/gpu_batch_norm.h"

namespace {

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CHECK_CUDNN(x)                                                                          \
  do {                                                                                          \
    cudnnStatus_t s_ = (x);                                                                     \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

const float kOne = 1.f, kZero = 0.f;

struct Conv {
  const char* name;
  int in_c, out_c, hw, k, stride;
  int pad() const { return k / 2; }
  int out_hw() const { return (hw + 2 * pad() - k) / stride + 1; }
};

// The resnet of worker/model/model_zoo.cc on 28x28x1 inputs.
const Conv kConvs[] = {
    {"stem 1->32 3x3", 1, 32, 28, 3, 1},         {"block1 32->32 3x3", 32, 32, 28, 3, 1},
    {"block2 32->64 3x3 s2", 32, 64, 28, 3, 2},  {"block2 64->64 3x3", 64, 64, 14, 3, 1},
    {"block2 short 1x1 s2", 32, 64, 28, 1, 2},   {"block3 64->128 3x3 s2", 64, 128, 14, 3, 2},
    {"block3 128->128 3x3", 128, 128, 7, 3, 1},  {"block3 short 1x1 s2", 64, 128, 14, 1, 2},
};

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
  template <typename F>
  float Ms(int reps, F f) {
    for (int i = 0; i < 3; ++i) f();
    CHECK_CUDA(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) f();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms / reps;
  }
};

float* DeviceFloats(size_t n) {
  float* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(float)));
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = float((i * 2654435761u) % 1000) / 1000.f - 0.5f;
  CHECK_CUDA(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

struct Workspace {
  void* p = nullptr;
  size_t bytes = 0;
  void* Get(size_t want) {
    if (want > bytes) {
      if (p != nullptr) CHECK_CUDA(cudaFree(p));
      CHECK_CUDA(cudaMalloc(&p, want));
      bytes = want;
    }
    return p;
  }
};

template <typename Perf>
const Perf* FirstOk(const Perf* perf, int got) {
  for (int i = 0; i < got; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return &perf[i];
  return nullptr;
}

// "ms (algo)" for the heuristics' first pick, then cudnnFind's fastest.
struct ConvTimes {
  float heur[3], best[3];
  int heur_algo[3], best_algo[3];
};

ConvTimes TimeConv(cudnnHandle_t h, const Conv& c, cudnnTensorFormat_t fmt, int n, int reps, Workspace& ws) {
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&xd));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&yd));
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&wd));
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&cd));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(xd, fmt, CUDNN_DATA_FLOAT, n, c.in_c, c.hw, c.hw));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(yd, fmt, CUDNN_DATA_FLOAT, n, c.out_c, c.out_hw(), c.out_hw()));
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, fmt, c.out_c, c.in_c, c.k, c.k));
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(cd, c.pad(), c.pad(), c.stride, c.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  const size_t xs = size_t(n) * c.in_c * c.hw * c.hw, ys = size_t(n) * c.out_c * c.out_hw() * c.out_hw(),
               wsz = size_t(c.out_c) * c.in_c * c.k * c.k;
  float *x = DeviceFloats(xs), *y = DeviceFloats(ys), *w = DeviceFloats(wsz), *dx = DeviceFloats(xs),
        *dy = DeviceFloats(ys), *dw = DeviceFloats(wsz);
  Timer t;
  ConvTimes r{};
  int got = 0;
  {
    cudnnConvolutionFwdAlgoPerf_t p[16];
    CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 16, &got, p));
    const auto* f = FirstOk(p, got);
    size_t b = 0;
    CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, f->algo, &b));
    void* wp = ws.Get(b);
    r.heur_algo[0] = f->algo;
    r.heur[0] = t.Ms(reps, [&] {
      CHECK_CUDNN(cudnnConvolutionForward(h, &kOne, xd, x, wd, w, cd, f->algo, wp, b, &kZero, yd, y));
    });
    CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithm(h, xd, wd, cd, yd, 16, &got, p));
    const auto* best = FirstOk(p, got);
    r.best_algo[0] = best->algo;
    CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, best->algo, &b));
    wp = ws.Get(b);
    r.best[0] = t.Ms(reps, [&] {
      CHECK_CUDNN(cudnnConvolutionForward(h, &kOne, xd, x, wd, w, cd, best->algo, wp, b, &kZero, yd, y));
    });
  }
  {
    cudnnConvolutionBwdDataAlgoPerf_t p[16];
    CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wd, yd, cd, xd, 16, &got, p));
    const auto* f = FirstOk(p, got);
    size_t b = 0;
    CHECK_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, f->algo, &b));
    void* wp = ws.Get(b);
    r.heur_algo[1] = f->algo;
    r.heur[1] = t.Ms(reps, [&] {
      CHECK_CUDNN(cudnnConvolutionBackwardData(h, &kOne, wd, w, yd, dy, cd, f->algo, wp, b, &kZero, xd, dx));
    });
    CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(h, wd, yd, cd, xd, 16, &got, p));
    const auto* best = FirstOk(p, got);
    r.best_algo[1] = best->algo;
    CHECK_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, best->algo, &b));
    wp = ws.Get(b);
    r.best[1] = t.Ms(reps, [&] {
      CHECK_CUDNN(cudnnConvolutionBackwardData(h, &kOne, wd, w, yd, dy, cd, best->algo, wp, b, &kZero, xd, dx));
    });
  }
  {
    cudnnConvolutionBwdFilterAlgoPerf_t p[16];
    CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, 16, &got, p));
    const auto* f = FirstOk(p, got);
    size_t b = 0;
    CHECK_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, f->algo, &b));
    void* wp = ws.Get(b);
    r.heur_algo[2] = f->algo;
    r.heur[2] = t.Ms(reps, [&] {
      CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &kOne, xd, x, yd, dy, cd, f->algo, wp, b, &kZero, wd, dw));
    });
    CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(h, xd, yd, cd, wd, 16, &got, p));
    const auto* best = FirstOk(p, got);
    r.best_algo[2] = best->algo;
    CHECK_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, best->algo, &b));
    wp = ws.Get(b);
    r.best[2] = t.Ms(reps, [&] {
      CHECK_CUDNN(cudnnConvolutionBackwardFilter(h, &kOne, xd, x, yd, dy, cd, best->algo, wp, b, &kZero, wd, dw));
    });
  }
  for (float* p : {x, y, w, dx, dy, dw}) CHECK_CUDA(cudaFree(p));
  cudnnDestroyConvolutionDescriptor(cd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyTensorDescriptor(xd);
  return r;
}

// Forward training + backward of one spatial batch norm, ms.
float TimeBatchNorm(cudnnHandle_t h, int n, int c, int hw, cudnnTensorFormat_t fmt, cudnnBatchNormMode_t mode,
                    int reps) {
  cudnnTensorDescriptor_t xd, bd;
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&xd));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&bd));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(xd, fmt, CUDNN_DATA_FLOAT, n, c, hw, hw));
  CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(bd, xd, mode));
  const size_t xs = size_t(n) * c * hw * hw;
  float *x = DeviceFloats(xs), *y = DeviceFloats(xs), *dy = DeviceFloats(xs), *dx = DeviceFloats(xs);
  float *gamma = DeviceFloats(c), *beta = DeviceFloats(c), *mean = DeviceFloats(c), *var = DeviceFloats(c),
        *smean = DeviceFloats(c), *sinv = DeviceFloats(c), *dg = DeviceFloats(c), *db = DeviceFloats(c);
  CHECK_CUDA(cudaMemset(var, 0, c * sizeof(float)));
  Timer t;
  const float ms = t.Ms(reps, [&] {
    CHECK_CUDNN(cudnnBatchNormalizationForwardTraining(h, mode, &kOne, &kZero, xd, x, xd, y, bd, gamma, beta, 0.01,
                                                       mean, var, 1e-3, smean, sinv));
    CHECK_CUDNN(cudnnBatchNormalizationBackward(h, mode, &kOne, &kZero, &kOne, &kZero, xd, x, xd, dy, xd, dx, bd,
                                                gamma, dg, db, 1e-3, smean, sinv));
  });
  for (float* p : {x, y, dy, dx, gamma, beta, mean, var, smean, sinv, dg, db}) CHECK_CUDA(cudaFree(p));
  cudnnDestroyTensorDescriptor(bd);
  cudnnDestroyTensorDescriptor(xd);
  return ms;
}

// mirrored's batch norm, forward training + backward, ms: on NCHW (the GPU
// backend's layout), or on NHWC (as a [n * side * side, c] matrix, its
// kernels' other path).
float TimeOurBatchNorm(int n, int c, int side, bool nchw, int reps) {
  namespace g = mirrored::model::gpu;
  const size_t xs = size_t(n) * c * side * side;
  const size_t images = nchw ? size_t(n) : size_t(n) * side * side, plane = nchw ? size_t(side) * side : 1;
  float *x = DeviceFloats(xs), *y = DeviceFloats(xs), *dy = DeviceFloats(xs), *dx = DeviceFloats(xs);
  float *gamma = DeviceFloats(c), *beta = DeviceFloats(c), *mean = DeviceFloats(c), *var = DeviceFloats(c),
        *dg = DeviceFloats(c), *db = DeviceFloats(c), *scratch = DeviceFloats(g::BatchNormScratchFloats(c));
  Timer t;
  const float ms = t.Ms(reps, [&] {
    g::BatchNormTrainingForward(nullptr, images, c, plane, x, gamma, beta, 1e-3f, 0.99f, mean, var, y, scratch);
    g::BatchNormBackward(nullptr, images, c, plane, x, dy, gamma, dx, dg, db, scratch);
  });
  for (float* p : {x, y, dy, dx, gamma, beta, mean, var, dg, db, scratch}) CHECK_CUDA(cudaFree(p));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 256, reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0) {
      batch = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--reps") == 0) {
      reps = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: cudnn_layout_bench [--batch 256] [--reps 20]\n");
      return 2;
    }
  }
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::fprintf(stderr, "cudnn_layout_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudnnHandle_t h;
  CHECK_CUDNN(cudnnCreate(&h));
  std::printf("# cudnn_layout_bench: %s, cuDNN %zu, batch %d, FP32 FMA math (no TF32), mean of %d reps\n",
              prop.name, cudnnGetVersion(), batch, reps);
  std::printf("# ms per call; heur = the heuristics' first supported algorithm (mirrored's pick), find = "
              "the algorithm cudnnFind ranks fastest, timed the same way; (algo number)\n");
  std::printf("%-24s %-5s %16s %16s %16s %16s %16s %16s %9s\n", "conv", "fmt", "fwd heur", "fwd find",
              "bwd-data heur", "bwd-data find", "bwd-filt heur", "bwd-filt find", "sum heur");
  Workspace ws;
  float total[2] = {0, 0}, total_best[2] = {0, 0};
  for (const Conv& c : kConvs) {
    for (int f = 0; f < 2; ++f) {
      const cudnnTensorFormat_t fmt = f == 0 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
      ConvTimes r = TimeConv(h, c, fmt, batch, reps, ws);
      // block1 has two 32->32 convs; the others appear once.
      const int times = std::strcmp(c.name, "block1 32->32 3x3") == 0 ? 2 : 1;
      float sum = 0, sum_best = 0;
      char cell[6][32];
      for (int k = 0; k < 3; ++k) {
        std::snprintf(cell[2 * k], sizeof(cell[0]), "%.3f (%d)", r.heur[k], r.heur_algo[k]);
        std::snprintf(cell[2 * k + 1], sizeof(cell[0]), "%.3f (%d)", r.best[k], r.best_algo[k]);
        sum += r.heur[k];
        sum_best += r.best[k];
      }
      // The stem's backward data is never needed (its input is the images).
      if (c.in_c == 1) sum -= r.heur[1], sum_best -= r.best[1];
      total[f] += times * sum;
      total_best[f] += times * sum_best;
      std::printf("%-24s %-5s %16s %16s %16s %16s %16s %16s %9.3f\n", c.name, f == 0 ? "NHWC" : "NCHW", cell[0],
                  cell[1], cell[2], cell[3], cell[4], cell[5], sum);
    }
  }
  std::printf("# one resnet step's convolutions (fwd + bwd): NHWC heur %.2f ms, find %.2f ms; NCHW heur %.2f ms, "
              "find %.2f ms\n", total[0], total_best[0], total[1], total_best[1]);

  std::printf("\n%-24s %12s %12s %12s %12s %12s\n", "batch norm (fwd+bwd)", "NHWC", "NHWC persist", "NCHW",
              "ours NHWC", "ours NCHW");
  struct Bn { const char* name; int c, hw, count; };
  float bn_total[5] = {0, 0, 0, 0, 0};
  for (Bn b : {Bn{"32 ch 28x28", 32, 28, 3}, Bn{"64 ch 14x14", 64, 14, 3}, Bn{"128 ch 7x7", 128, 7, 3}}) {
    float ms[5] = {TimeBatchNorm(h, batch, b.c, b.hw, CUDNN_TENSOR_NHWC, CUDNN_BATCHNORM_SPATIAL, reps),
                   TimeBatchNorm(h, batch, b.c, b.hw, CUDNN_TENSOR_NHWC, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, reps),
                   TimeBatchNorm(h, batch, b.c, b.hw, CUDNN_TENSOR_NCHW, CUDNN_BATCHNORM_SPATIAL, reps),
                   TimeOurBatchNorm(batch, b.c, b.hw, /*nchw=*/false, reps),
                   TimeOurBatchNorm(batch, b.c, b.hw, /*nchw=*/true, reps)};
    for (int k = 0; k < 5; ++k) bn_total[k] += b.count * ms[k];
    std::printf("%-24s %12.3f %12.3f %12.3f %12.3f %12.3f\n", b.name, ms[0], ms[1], ms[2], ms[3], ms[4]);
  }
  std::printf("# one resnet step's batch norms (3 each at 28x28, 14x14, 7x7): cuDNN NHWC %.2f ms, persistent "
              "%.2f ms, NCHW %.2f ms; mirrored NHWC %.2f ms, NCHW %.2f ms\n", bn_total[0], bn_total[1],
              bn_total[2], bn_total[3], bn_total[4]);
  cudnnDestroy(h);
  return 0;
}
