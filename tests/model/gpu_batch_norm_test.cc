// The batch-norm kernels against a float64 reference written out here: the
// CPU's oneDNN one (always), the GPU's (worker/model/gpu_batch_norm.cu, label
// `gpu`, skipped when no CUDA device is visible), on the shapes the models
// never use:
// one row, channel counts that are not a multiple of 32 (a partial block of
// channel lanes), fewer rows than one reduction slice, and enough rows for
// every slice to loop. Forward training (output, moving statistics),
// backward (dx, dgamma, dbeta), then inference with the updated statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/util/gpu_test_util.h"
#include "worker/model/backend.h"

namespace mirrored::model {
namespace {

// A backend's device copy of a host vector.
class DeviceVector {
 public:
  DeviceVector(Backend& be, const std::vector<float>& host) : be_(be), size_(host.size()) {
    p_ = be_.Allocate(std::max<size_t>(size_, 1));
    be_.Upload(host.data(), p_, size_);
  }
  ~DeviceVector() { be_.Free(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  float* get() { return p_; }
  std::vector<float> Host() const {
    std::vector<float> h(size_);
    be_.Download(p_, h.data(), size_);
    return h;
  }

 private:
  Backend& be_;
  size_t size_;
  float* p_;
};

struct Results {
  std::vector<float> y, moving_mean, moving_var, dx, dgamma, dbeta, y_inference;
};

struct Inputs {
  std::vector<float> x, dy, gamma, beta, moving_mean, moving_var;
};

// NHWC [n, hw, c] -> NCHW [n, c, hw] (to_first), or back: written out here,
// not the backends' own reorder.
std::vector<float> Reorder(const std::vector<float>& v, int n, int hw, int c, bool to_first) {
  std::vector<float> out(v.size());
  for (size_t b = 0; b < size_t(n); ++b)
    for (size_t p = 0; p < size_t(hw); ++p)
      for (size_t ch = 0; ch < size_t(c); ++ch) {
        const size_t last = (b * hw + p) * c + ch, first = (b * c + ch) * hw + p;
        if (to_first) out[first] = v[last];
        else out[last] = v[first];
      }
  return out;
}

// Inputs and results in NHWC; a channels-first backend (the GPU) gets and
// gives its own layout.
Results RunBatchNorm(Backend& be, const BatchNormSpec& spec, int n, const Inputs& nhwc) {
  const int hw = spec.h * spec.w, c = spec.channels;
  const bool first = be.channels_first();
  Inputs in = nhwc;
  if (first) {
    in.x = Reorder(nhwc.x, n, hw, c, true);
    in.dy = Reorder(nhwc.dy, n, hw, c, true);
  }
  auto kernel = be.MakeBatchNorm(spec);
  DeviceVector x(be, in.x), dy(be, in.dy), gamma(be, in.gamma), beta(be, in.beta), mm(be, in.moving_mean),
      mv(be, in.moving_var), y(be, std::vector<float>(in.x.size())), dx(be, std::vector<float>(in.x.size())),
      dgamma(be, std::vector<float>(in.gamma.size())), dbeta(be, std::vector<float>(in.gamma.size()));
  kernel->Forward(n, x.get(), gamma.get(), beta.get(), mm.get(), mv.get(), y.get(), /*training=*/true);
  Results r;
  r.y = y.Host();
  r.moving_mean = mm.Host();
  r.moving_var = mv.Host();
  kernel->Backward(n, x.get(), dy.get(), gamma.get(), beta.get(), dx.get(), dgamma.get(), dbeta.get());
  r.dx = dx.Host();
  r.dgamma = dgamma.Host();
  r.dbeta = dbeta.Host();
  kernel->Forward(n, x.get(), gamma.get(), beta.get(), mm.get(), mv.get(), y.get(), /*training=*/false);
  r.y_inference = y.Host();
  if (first) {
    r.y = Reorder(r.y, n, hw, c, false);
    r.dx = Reorder(r.dx, n, hw, c, false);
    r.y_inference = Reorder(r.y_inference, n, hw, c, false);
  }
  return r;
}

// The definition, in double: statistics per channel over rows = n * h * w
// (NHWC), biased variance to normalise, unbiased into the moving variance.
Results Reference(const BatchNormSpec& spec, int n, const Inputs& in) {
  const int c = spec.channels;
  const size_t rows = size_t(n) * spec.h * spec.w;
  std::vector<double> mean(c, 0), var(c, 0), sdy(c, 0), sdyx(c, 0);
  for (size_t r = 0; r < rows; ++r)
    for (int ch = 0; ch < c; ++ch) mean[ch] += in.x[r * c + ch];
  for (double& m : mean) m /= double(rows);
  for (size_t r = 0; r < rows; ++r)
    for (int ch = 0; ch < c; ++ch) var[ch] += (in.x[r * c + ch] - mean[ch]) * (in.x[r * c + ch] - mean[ch]);
  for (double& v : var) v /= double(rows);
  Results out;
  out.y.resize(in.x.size());
  out.dx.resize(in.x.size());
  out.y_inference.resize(in.x.size());
  auto inv_std = [&](int ch) { return 1.0 / std::sqrt(var[ch] + spec.epsilon); };
  for (size_t r = 0; r < rows; ++r)
    for (int ch = 0; ch < c; ++ch) {
      const size_t i = r * c + ch;
      const double xhat = (in.x[i] - mean[ch]) * inv_std(ch);
      out.y[i] = float(xhat * in.gamma[ch] + in.beta[ch]);
      sdy[ch] += in.dy[i];
      sdyx[ch] += in.dy[i] * xhat;
    }
  const double bessel = rows > 1 ? double(rows) / double(rows - 1) : 1.0;
  for (int ch = 0; ch < c; ++ch) {
    out.moving_mean.push_back(float(spec.momentum * in.moving_mean[ch] + (1 - spec.momentum) * mean[ch]));
    out.moving_var.push_back(float(spec.momentum * in.moving_var[ch] + (1 - spec.momentum) * var[ch] * bessel));
    out.dbeta.push_back(float(sdy[ch]));
    out.dgamma.push_back(float(sdyx[ch]));
  }
  for (size_t r = 0; r < rows; ++r)
    for (int ch = 0; ch < c; ++ch) {
      const size_t i = r * c + ch;
      const double xhat = (in.x[i] - mean[ch]) * inv_std(ch);
      out.dx[i] = float(in.gamma[ch] * inv_std(ch) *
                        (in.dy[i] - sdy[ch] / double(rows) - xhat * sdyx[ch] / double(rows)));
      out.y_inference[i] = float((in.x[i] - double(out.moving_mean[ch])) /
                                     std::sqrt(double(out.moving_var[ch]) + spec.epsilon) * in.gamma[ch] +
                                 in.beta[ch]);
    }
  return out;
}

// max |a - b| <= rel * max |a| + abs.
void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double rel, double abs,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, double(std::fabs(a[i])));
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as the worst
  }
  EXPECT_LE(worst, rel * scale + abs) << what << ": worst difference " << worst << " at " << at << " (cpu " << a[at]
                                      << ", gpu " << b[at] << "), scale " << scale;
}

struct Shape {
  int n, h, w, c;
};

Inputs MakeInputs(const Shape& sh) {
  const size_t count = size_t(sh.n) * sh.h * sh.w * sh.c;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Inputs in;
  in.x.resize(count);
  in.dy.resize(count);
  // An offset per channel: the variance must not come from E[x^2] - E[x]^2.
  for (size_t i = 0; i < count; ++i) in.x[i] = 3.f + float(i % sh.c) * 0.01f + u(rng);
  for (float& v : in.dy) v = u(rng);
  for (int ch = 0; ch < sh.c; ++ch) {
    in.gamma.push_back(1.f + 0.5f * u(rng));
    in.beta.push_back(0.5f * u(rng));
    in.moving_mean.push_back(0.5f);
    in.moving_var.push_back(2.f);
  }
  return in;
}

std::string Name(const Shape& s) {
  return "n" + std::to_string(s.n) + "_" + std::to_string(s.h) + "x" + std::to_string(s.w) + "_c" +
         std::to_string(s.c);
}

void PrintTo(const Shape& s, std::ostream* os) { *os << Name(s); }

// float32 kernels against the float64 definition.
void ExpectMatchesReference(Backend& be, const Shape& sh) {
  // Momentum 0.5: the batch's statistics weigh in the moving ones enough
  // that the unbiased variance (rows / (rows - 1)) shows.
  const BatchNormSpec spec{.h = sh.h, .w = sh.w, .channels = sh.c, .momentum = 0.5f};
  const Inputs in = MakeInputs(sh);
  const Results want = Reference(spec, sh.n, in);
  const Results got = RunBatchNorm(be, spec, sh.n, in);
  const std::string at = Name(sh) + " ";
  ExpectClose(want.y, got.y, 1e-4, 1e-5, at + "y");
  ExpectClose(want.moving_mean, got.moving_mean, 1e-5, 1e-6, at + "moving mean");
  ExpectClose(want.moving_var, got.moving_var, 1e-4, 1e-6, at + "moving variance");
  ExpectClose(want.dx, got.dx, 1e-3, 1e-5, at + "dx");
  ExpectClose(want.dgamma, got.dgamma, 1e-3, 1e-4, at + "dgamma");
  ExpectClose(want.dbeta, got.dbeta, 1e-4, 1e-4, at + "dbeta");
  ExpectClose(want.y_inference, got.y_inference, 1e-4, 1e-5, at + "inference y");
}

class BatchNormKernelTest : public ::testing::TestWithParam<Shape> {};

TEST_P(BatchNormKernelTest, CpuMatchesTheDefinition) {
  std::unique_ptr<Backend> cpu = MakeCpuBackend();
  ExpectMatchesReference(*cpu, GetParam());
}

TEST_P(BatchNormKernelTest, GpuMatchesTheDefinition) {
  MIRRORED_SKIP_OR_FAIL_WITHOUT_GPU(GpuDeviceCount(), "GpuDeviceCount() is 0");
  auto gpu = MakeGpuBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ExpectMatchesReference(**gpu, GetParam());
}

// NHWC (the CPU), and the GPU's NCHW with h * w == 1 (a [n, c] matrix): a
// reduction slice is 64 rows, at most 256 slices. NCHW with h * w > 1: a
// slice is 4096 values of a channel's n * h * w, at most 256 slices.
INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormKernelTest,
                         ::testing::Values(Shape{1, 1, 1, 1},        // one row: zero variance
                                           Shape{7, 3, 3, 33},       // 63 rows, a partial block of lanes
                                           Shape{65, 1, 1, 33},      // 65 rows: two slices
                                           Shape{2, 5, 5, 1000},     // many channels, few rows
                                           Shape{40, 25, 20, 5},     // 20,000 rows: 256 slices, each loops
                                           Shape{1000, 10, 10, 3},   // 100,000 rows: 25 NCHW slices
                                           Shape{300, 60, 60, 2}),   // 1.08M per channel: 256 NCHW slices
                         [](const ::testing::TestParamInfo<Shape>& info) { return Name(info.param); });

}  // namespace
}  // namespace mirrored::model
