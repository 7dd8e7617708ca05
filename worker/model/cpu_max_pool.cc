#include "worker/model/cpu_max_pool.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "worker/model/cpu_max_pool_rows.h"

namespace mirrored::model {
namespace {

// Below this many output elements the OpenMP team is not woken.
constexpr size_t kParallelMin = 1 << 14;

class CpuMaxPool final : public PoolKernel {
 public:
  explicit CpuMaxPool(const PoolSpec& s)
      : s_(s), g_{s.out_w(), s.channels, s.size, s.stride, size_t(s.in_w) * s.channels} {}

  bool FoldInputReluMask() override {
    relu_input_ = true;
    return true;
  }

  void Forward(int n, const float* x, float* y, bool training) override {
    const int rows = n * s_.out_h();
    const size_t row_out = size_t(s_.out_w()) * s_.channels;
    int32_t* argmax = nullptr;
    if (training) {
      if (argmax_.size() < size_t(rows) * row_out) argmax_.resize(size_t(rows) * row_out);
      argmax = argmax_.data();
    }
#pragma omp parallel for if (size_t(rows) * row_out > kParallelMin)
    for (int r = 0; r < rows; ++r) {
      const float* in = x + InRow(r / s_.out_h(), r % s_.out_h() * s_.stride);
      if (argmax != nullptr) {
        MaxPoolRowArgmax(g_, in, y + size_t(r) * row_out, argmax + size_t(r) * row_out);
      } else {
        MaxPoolRow(g_, in, y + size_t(r) * row_out);
      }
    }
  }

  void Backward(int n, const float*, const float* y, const float* dy, float* dx) override {
    const int rows = n * s_.out_h();
    const size_t row_out = size_t(s_.out_w()) * s_.channels;
    const MaxPoolGradientRule rule = relu_input_ ? MaxPoolGradientRule::kPositiveOnly : MaxPoolGradientRule::kAll;
    if (s_.stride != s_.size) {
      // Overlapping windows add two outputs' gradients into one input, and
      // windows with gaps between them leave inputs no window covers: dx
      // is zeroed first and the rows run on one thread.
      std::memset(dx, 0, size_t(n) * s_.in_h * s_.in_w * s_.channels * sizeof(float));
      for (int r = 0; r < rows; ++r) {
        const size_t o = size_t(r) * row_out;
        MaxPoolRowGradientAdd(g_, rule, argmax_.data() + o, y + o, dy + o,
                              dx + InRow(r / s_.out_h(), r % s_.out_h() * s_.stride));
      }
      return;
    }
#pragma omp parallel for if (size_t(rows) * row_out > kParallelMin)
    for (int r = 0; r < rows; ++r) BackwardDisjointRow(r, rule, y, dy, dx);
  }

 private:
  // Output row r's windows tile input rows oh * size .. + size: each input
  // there is written once, the columns past the last window with zeros,
  // and after the image's last output row the input rows below it too.
  void BackwardDisjointRow(int r, MaxPoolGradientRule rule, const float* y, const float* dy, float* dx) const {
    const int b = r / s_.out_h(), oh = r % s_.out_h();
    const size_t o = size_t(r) * s_.out_w() * s_.channels;
    float* rows = dx + InRow(b, oh * s_.stride);
    MaxPoolRowGradient(g_, rule, argmax_.data() + o, y + o, dy + o, rows);
    const size_t covered = size_t(s_.out_w()) * s_.stride * s_.channels;
    if (covered < g_.in_row) {
      for (int i = 0; i < s_.size; ++i)
        std::memset(rows + i * g_.in_row + covered, 0, (g_.in_row - covered) * sizeof(float));
    }
    const int below = (oh + 1) * s_.stride;
    if (oh + 1 == s_.out_h() && below < s_.in_h)
      std::memset(dx + InRow(b, below), 0, size_t(s_.in_h - below) * g_.in_row * sizeof(float));
  }

  // Offset of input row h of image b.
  size_t InRow(int b, int h) const { return (size_t(b) * s_.in_h + h) * g_.in_row; }

  PoolSpec s_;
  MaxPoolRowGeometry g_;
  bool relu_input_ = false;
  // Per output element of the last training Forward: the window element
  // (row-major, 0 .. size * size - 1) that holds the maximum, the first
  // of equal ones.
  std::vector<int32_t> argmax_;
};

}  // namespace

std::unique_ptr<PoolKernel> MakeCpuMaxPool(const PoolSpec& spec) { return std::make_unique<CpuMaxPool>(spec); }

}  // namespace mirrored::model
