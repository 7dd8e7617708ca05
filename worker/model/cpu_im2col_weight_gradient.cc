#include "worker/model/cpu_im2col_weight_gradient.h"

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

namespace mirrored::model {
namespace {

// col is gathered a chunk of images at a time so that it stays about this
// size whatever the batch (resnet's 28x28x32 layer would need 58 MiB for
// 64 images at once). Pixel-major: 1 MiB, which was 5-10% faster than 4
// MiB on the cnn's conv2 (conv_gradient_bench, 2026-11-28). Patch-major
// (one input channel) keeps 4 MiB: the chunks set the order in which the
// GEMM sums, and with it the cnn's conv1 gradient to the last bit.
constexpr size_t kPixelMajorChunkBytes = size_t(1) << 20;
constexpr size_t kPatchMajorChunkBytes = size_t(4) << 20;

}  // namespace

Im2colWeightGradient::Im2colWeightGradient(const ConvSpec& spec)
    : s_(spec), patch_major_(spec.in_c == 1), patch_(spec.kernel * spec.kernel * spec.in_c) {
  const size_t image_bytes = size_t(s_.out_h()) * s_.out_w() * (patch_ + 1) * sizeof(float);
  const size_t chunk_bytes = patch_major_ ? kPatchMajorChunkBytes : kPixelMajorChunkBytes;
  chunk_images_ = int(std::max<size_t>(1, chunk_bytes / std::max<size_t>(1, image_bytes)));
  result_.resize(size_t(patch_ + 1) * s_.out_c);
}

void Im2colWeightGradient::Prepare(int images) {
  if (images == prepared_images_) return;
  const size_t pixels = size_t(images) * s_.out_h() * s_.out_w();
  col_.assign(pixels * (patch_ + 1), 0.f);
  if (patch_major_)
    std::fill(col_.end() - pixels, col_.end(), 1.f);  // the last row
  else
    for (size_t r = 0; r < pixels; ++r) col_[r * (patch_ + 1) + patch_] = 1.f;  // the last column
  prepared_images_ = images;
}

void Im2colWeightGradient::Compute(int n, const float* x, const float* dy, float* dw, float* db) {
  const int pixels = s_.out_h() * s_.out_w(), per_chunk = std::max(1, std::min(n, chunk_images_));
  const size_t image = size_t(s_.in_h) * s_.in_w * s_.in_c;
  const int rows = patch_ + 1;  // dW's rows, then db's
  Prepare(per_chunk);
  std::fill(result_.begin(), result_.end(), 0.f);  // n == 0: all zero
  for (int first = 0; first < n; first += per_chunk) {
    const int count = std::min(per_chunk, n - first), k = count * pixels;
    const float* dy_chunk = dy + size_t(first) * pixels * s_.out_c;
    dnnl_status_t status;
    if (patch_major_) {  // col [rows, k] (leading dimension per_chunk * pixels)
      GatherPatchMajor(x + size_t(first) * image, count, col_.data(), per_chunk * pixels);
      status = dnnl_sgemm('N', 'N', rows, s_.out_c, k, 1.f, col_.data(), per_chunk * pixels, dy_chunk, s_.out_c,
                          first == 0 ? 0.f : 1.f, result_.data(), s_.out_c);
    } else {  // col [k, rows]
      GatherPixelMajor(x + size_t(first) * image, count, col_.data(), rows);
      status = dnnl_sgemm('T', 'N', rows, s_.out_c, k, 1.f, col_.data(), rows, dy_chunk, s_.out_c,
                          first == 0 ? 0.f : 1.f, result_.data(), s_.out_c);
    }
    if (status != dnnl_success) throw dnnl::error(status, "dnnl_sgemm (convolution kernel gradient)");
  }
  std::copy(result_.begin(), result_.begin() + size_t(patch_) * s_.out_c, dw);
  if (s_.bias && db != nullptr) std::copy(result_.end() - s_.out_c, result_.end(), db);
}

void Im2colWeightGradient::GatherPixelMajor(const float* image, int count, float* col, int ld) const {
  const size_t image_size = size_t(s_.in_h) * s_.in_w * s_.in_c;
#pragma omp parallel for collapse(2) if (count > 1)
  for (int b = 0; b < count; ++b)
    for (int oi = 0; oi < s_.out_h(); ++oi)
      for (int oj = 0; oj < s_.out_w(); ++oj) {
        const size_t row = (size_t(b) * s_.out_h() + oi) * s_.out_w() + oj;
        GatherPixel(image + size_t(b) * image_size, oi, oj, col + row * ld);
      }
}

// The k x k x in_c patch under output pixel (oi, oj), zeros in the padding.
// A kernel row's k pixels are adjacent in NHWC: one copy when inside.
void Im2colWeightGradient::GatherPixel(const float* image, int oi, int oj, float* row) const {
  const int k = s_.kernel, c = s_.in_c, span = k * c;
  const int top = oi * s_.stride - s_.pad_h.before, left = oj * s_.stride - s_.pad_w.before;
  for (int p = 0; p < k; ++p, row += span) {
    const int i = top + p;
    if (i < 0 || i >= s_.in_h) {
      std::fill(row, row + span, 0.f);
      continue;
    }
    const float* line = image + size_t(i) * s_.in_w * c;  // input row i
    if (left >= 0 && left + k <= s_.in_w) {
      // memcpy: glibc's copy uses the widest vectors the CPU has; the
      // plain loop this replaces stayed scalar at -O2 (a runtime length).
      std::memcpy(row, line + size_t(left) * c, size_t(span) * sizeof(float));
      continue;
    }
    for (int q = 0; q < k; ++q) {
      const int j = left + q;
      float* dst = row + q * c;
      if (j < 0 || j >= s_.in_w)
        std::fill(dst, dst + c, 0.f);
      else
        std::copy(line + size_t(j) * c, line + size_t(j + 1) * c, dst);
    }
  }
}

// One input channel: row (p, q) of col holds, for every output pixel, the
// input pixel that kernel tap (p, q) meets there.
void Im2colWeightGradient::GatherPatchMajor(const float* image, int count, float* col, int ld) const {
  const int k = s_.kernel, oh = s_.out_h(), ow = s_.out_w();
  const size_t image_size = size_t(s_.in_h) * s_.in_w;
#pragma omp parallel for collapse(2) if (count > 1)
  for (int tap = 0; tap < k * k; ++tap)
    for (int b = 0; b < count; ++b) {
      const int p = tap / k, q = tap % k;
      float* out = col + size_t(tap) * ld + size_t(b) * oh * ow;
      for (int oi = 0; oi < oh; ++oi, out += ow) {
        const int i = oi * s_.stride - s_.pad_h.before + p;
        if (i < 0 || i >= s_.in_h)
          std::fill(out, out + ow, 0.f);
        else
          GatherTapRow(image + size_t(b) * image_size + size_t(i) * s_.in_w, q - s_.pad_w.before, out);
      }
    }
}

// out[oj] = line[left + oj * stride], zero outside [0, in_w): output
// columns [lo, hi) read inside the input row.
void Im2colWeightGradient::GatherTapRow(const float* line, int left, float* out) const {
  const int ow = s_.out_w(), st = s_.stride;
  const int lo = std::min(ow, left >= 0 ? 0 : (-left + st - 1) / st);
  const int hi = std::max(lo, std::min(ow, left >= s_.in_w ? 0 : (s_.in_w - 1 - left) / st + 1));
  std::fill(out, out + lo, 0.f);
  if (st == 1)
    std::copy(line + left + lo, line + left + hi, out + lo);
  else
    for (int oj = lo; oj < hi; ++oj) out[oj] = line[left + oj * st];
  std::fill(out + hi, out + ow, 0.f);
}

}  // namespace mirrored::model
