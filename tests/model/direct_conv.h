// A convolution written out as loops (double sums), for checking a
// backend's ConvKernel on any padding: forward, and backward's input, kernel
// and bias gradients, in the backend's layout. Padding is the spec's, taken
// as given: whether it is TensorFlow's is conv_padding_test's question.
//
//   ExpectConvKernelMatchesDirect(*MakeCpuBackend(), spec.SamePadded(), /*n=*/2, 1e-5);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "worker/model/backend.h"

namespace mirrored::model {

struct DirectConv {
  std::vector<double> y, dx, dw, db;
};

// x: n images in_h x in_w x in_c, laid out NCHW when channels_first, else
// NHWC (y, dy and dx likewise); w HWIO; b out_c values (used when s.bias).
inline DirectConv RunDirectConv(const ConvSpec& s, int n, bool channels_first, const std::vector<float>& x,
                                const std::vector<float>& w, const std::vector<float>& b,
                                const std::vector<float>& dy) {
  auto at = [&](int img, int i, int j, int c, int h, int wd, int ch) {
    return channels_first ? ((size_t(img) * ch + c) * h + i) * wd + j : ((size_t(img) * h + i) * wd + j) * ch + c;
  };
  const int oh = s.out_h(), ow = s.out_w(), k = s.kernel;
  DirectConv r{std::vector<double>(size_t(n) * oh * ow * s.out_c), std::vector<double>(x.size()),
               std::vector<double>(w.size()), std::vector<double>(size_t(s.out_c))};
  for (int img = 0; img < n; ++img)
    for (int oi = 0; oi < oh; ++oi)
      for (int oj = 0; oj < ow; ++oj)
        for (int co = 0; co < s.out_c; ++co) {
          const size_t yi = at(img, oi, oj, co, oh, ow, s.out_c);
          double sum = s.bias ? b[size_t(co)] : 0.0;
          const double g = dy[yi];
          r.db[size_t(co)] += g;
          for (int p = 0; p < k; ++p)
            for (int q = 0; q < k; ++q) {
              const int i = oi * s.stride - s.pad_h.before + p, j = oj * s.stride - s.pad_w.before + q;
              if (i < 0 || i >= s.in_h || j < 0 || j >= s.in_w) continue;  // padding: zeros
              for (int ci = 0; ci < s.in_c; ++ci) {
                const size_t xi = at(img, i, j, ci, s.in_h, s.in_w, s.in_c);
                const size_t wi = ((size_t(p) * k + q) * s.in_c + ci) * s.out_c + co;
                sum += double(x[xi]) * w[wi];
                r.dx[xi] += g * w[wi];
                r.dw[wi] += g * x[xi];
              }
            }
          r.y[yi] = sum;
        }
  return r;
}

// |want - got| <= tolerance * max(1, max |want|) everywhere.
inline void ExpectNear(const std::vector<double>& want, const std::vector<float>& got, double tolerance,
                       const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double scale = 1, worst = 0;
  size_t at = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(want[i] - got[i]);
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as the worst
  }
  EXPECT_LE(worst, tolerance * scale) << what << "[" << at << "]: direct " << want[at] << ", kernel " << got[at];
}

// The backend's kernel for `s` against RunDirectConv on n random images.
inline void ExpectConvKernelMatchesDirect(Backend& be, const ConvSpec& s, int n, double tolerance) {
  const std::string what = std::to_string(s.in_h) + "x" + std::to_string(s.in_w) + " k" + std::to_string(s.kernel) +
                           " s" + std::to_string(s.stride) + " pad " + std::to_string(s.pad_h.before) + "," +
                           std::to_string(s.pad_h.after) + " / " + std::to_string(s.pad_w.before) + "," +
                           std::to_string(s.pad_w.after);
  std::mt19937 rng(unsigned(s.in_h * 1000 + s.kernel * 10 + s.stride));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto random = [&](size_t count) {
    std::vector<float> v(count);
    for (float& e : v) e = u(rng);
    return v;
  };
  const size_t xs = size_t(n) * s.in_h * s.in_w * s.in_c, ys = size_t(n) * s.out_h() * s.out_w() * s.out_c;
  const size_t ws = size_t(s.kernel) * s.kernel * s.in_c * s.out_c;
  const std::vector<float> x = random(xs), w = random(ws), b = random(size_t(s.out_c)), dy = random(ys);
  const DirectConv want = RunDirectConv(s, n, be.channels_first(), x, w, b, dy);

  float* d[7];
  const size_t sizes[7] = {xs, ws, size_t(s.out_c), ys, ys, xs, ws};  // x w b y dy dx dw
  for (int i = 0; i < 7; ++i) d[i] = be.Allocate(sizes[i]);
  float* db = be.Allocate(size_t(s.out_c));
  be.Upload(x.data(), d[0], xs);
  be.Upload(w.data(), d[1], ws);
  be.Upload(b.data(), d[2], size_t(s.out_c));
  be.Upload(dy.data(), d[4], ys);
  std::unique_ptr<ConvKernel> k = be.MakeConv(s);
  k->Forward(n, d[0], d[1], d[2], d[3]);
  k->Backward(n, d[0], d[1], d[4], d[5], d[6], db);
  std::vector<float> y(ys), dx(xs), dw(ws), dbias(size_t(s.out_c));
  be.Download(d[3], y.data(), ys);
  be.Download(d[5], dx.data(), xs);
  be.Download(d[6], dw.data(), ws);
  be.Download(db, dbias.data(), dbias.size());
  be.Synchronize();
  for (int i = 0; i < 7; ++i) be.Free(d[i]);
  be.Free(db);
  ExpectNear(want.y, y, tolerance, what + ": output");
  ExpectNear(want.dx, dx, tolerance, what + ": input gradient");
  ExpectNear(want.dw, dw, tolerance, what + ": kernel gradient");
  if (s.bias) ExpectNear(want.db, dbias, tolerance, what + ": bias gradient");
}

}  // namespace mirrored::model
