#include "worker/model/cpu_max_pool.h"

#include <cstring>
#include <vector>

namespace mirrored::model {
namespace {

// Below this many output elements the OpenMP team is not woken.
constexpr size_t kParallelMin = 1 << 14;

class CpuMaxPool final : public PoolKernel {
 public:
  explicit CpuMaxPool(const PoolSpec& s) : s_(s) {}

  void Forward(int n, const float* x, float* y, bool) override {
    const int rows = n * s_.out_h();
#pragma omp parallel for if (size_t(rows) * s_.out_w() * s_.channels > kParallelMin)
    for (int r = 0; r < rows; ++r) ForwardRow(r, x, y);
  }

  void Backward(int n, const float* x, const float* y, const float* dy, float* dx) override {
    const int rows = n * s_.out_h();
    // Disjoint windows write each input they cover exactly once; inputs no
    // window covers (the last rows or columns when the stride does not
    // divide the size) and overlapping windows need dx zeroed first.
    // Overlapping windows may send two output rows' gradients to one input
    // row, so those run on one thread.
    const bool disjoint = s_.stride == s_.size;
    const bool covered = disjoint && s_.out_h() * s_.stride == s_.in_h && s_.out_w() * s_.stride == s_.in_w;
    if (!covered) std::memset(dx, 0, size_t(n) * s_.in_h * s_.in_w * s_.channels * sizeof(float));
#pragma omp parallel for if (disjoint && size_t(rows) * s_.out_w() * s_.channels > kParallelMin)
    for (int r = 0; r < rows; ++r) BackwardRow(r, x, y, dy, dx, disjoint);
  }

 private:
  // Output row r (image r / out_h, row r % out_h) from its input windows.
  void ForwardRow(int r, const float* x, float* y) const {
    const int C = s_.channels, b = r / s_.out_h(), oh = r % s_.out_h();
    for (int ow = 0; ow < s_.out_w(); ++ow) {
      float* __restrict out = y + (size_t(r) * s_.out_w() + ow) * C;
      std::memcpy(out, x + In(b, oh, ow, 0), sizeof(float) * C);
      for (int k = 1; k < s_.size * s_.size; ++k) {
        const float* __restrict in = x + In(b, oh, ow, k);
#pragma omp simd
        for (int c = 0; c < C; ++c) out[c] = in[c] > out[c] ? in[c] : out[c];
      }
    }
  }

  // The gradient goes to the first window element equal to the output:
  // `left` holds each channel's gradient until a window element takes it
  // (float selects only, so that the loops vectorise).
  void BackwardRow(int r, const float* x, const float* y, const float* dy, float* dx, bool disjoint) const {
    const int C = s_.channels, b = r / s_.out_h(), oh = r % s_.out_h();
    std::vector<float> left_buf(static_cast<size_t>(C));
    float* __restrict left = left_buf.data();
    for (int ow = 0; ow < s_.out_w(); ++ow) {
      const size_t o = (size_t(r) * s_.out_w() + ow) * C;
      const float* __restrict out = y + o;
      std::memcpy(left, dy + o, sizeof(float) * C);
      for (int k = 0; k < s_.size * s_.size; ++k) {
        const size_t i = In(b, oh, ow, k);
        const float* __restrict in = x + i;
        float* __restrict d = dx + i;
        if (disjoint) {
#pragma omp simd
          for (int c = 0; c < C; ++c) {
            const bool hit = in[c] == out[c];
            d[c] = hit ? left[c] : 0.f;
            left[c] = hit ? 0.f : left[c];
          }
        } else {
#pragma omp simd
          for (int c = 0; c < C; ++c) {
            const bool hit = in[c] == out[c];
            d[c] += hit ? left[c] : 0.f;
            left[c] = hit ? 0.f : left[c];
          }
        }
      }
    }
  }

  // Offset of channel 0 of window element k (row-major) of output (b, oh, ow).
  size_t In(int b, int oh, int ow, int k) const {
    const int h = oh * s_.stride + k / s_.size, w = ow * s_.stride + k % s_.size;
    return ((size_t(b) * s_.in_h + h) * s_.in_w + w) * s_.channels;
  }

  PoolSpec s_;
};

}  // namespace

std::unique_ptr<PoolKernel> MakeCpuMaxPool(const PoolSpec& spec) { return std::make_unique<CpuMaxPool>(spec); }

}  // namespace mirrored::model
