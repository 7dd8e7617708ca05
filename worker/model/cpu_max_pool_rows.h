// The loops of CpuMaxPool (cpu_max_pool.h) over one output row of NHWC
// max pooling: its out_w windows side by side, the channels innermost.
// Each is vectorised over the channels with an AVX2 copy picked at run
// time (cpu_simd_clones.h). Forward keeps, per output element, which
// window element held the maximum (the first of equal ones, in row-major
// window order); backward sends the gradient there without reading the
// input again.
//
//   MaxPoolRowGeometry g{out_w, channels, size, stride, in_w * channels};
//   MaxPoolRowArgmax(g, x_row, y_row, argmax_row);        // training forward
//   MaxPoolRowGradient(g, MaxPoolGradientRule::kAll, argmax_row, y_row, dy_row, dx_rows);
#pragma once

#include <cstddef>
#include <cstdint>

namespace mirrored::model {

struct MaxPoolRowGeometry {
  int out_w = 0, channels = 0, size = 2, stride = 2;
  size_t in_row = 0;  // floats from one input row to the next: in_w * channels
};

// Which outputs pass their gradient to their window's maximum.
enum class MaxPoolGradientRule {
  kAll,           // all but NaN outputs (no window element equals NaN)
  kPositiveOnly,  // outputs > 0 only: the backward of a ReLU that made the input, folded in
};

// y[ow, c] = the maximum of window ow, whose top-left element is
// x[ow * stride * channels + c] (x: the window row's first input row).
void MaxPoolRow(const MaxPoolRowGeometry& g, const float* x, float* y);
// As MaxPoolRow, and argmax[ow, c] = the window element holding it.
void MaxPoolRowArgmax(const MaxPoolRowGeometry& g, const float* x, float* y, int32_t* argmax);
// For windows that do not overlap (stride == size): writes every input
// element the row's windows cover, from row dx on: the output's gradient
// where the rule passes it to its maximum, zero elsewhere.
void MaxPoolRowGradient(const MaxPoolRowGeometry& g, MaxPoolGradientRule rule, const int32_t* argmax, const float* y,
                        const float* dy, float* dx);
// Any stride: adds the passed gradients into dx instead.
void MaxPoolRowGradientAdd(const MaxPoolRowGeometry& g, MaxPoolGradientRule rule, const int32_t* argmax,
                           const float* y, const float* dy, float* dx);

}  // namespace mirrored::model
