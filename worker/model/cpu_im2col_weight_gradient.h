// A convolution's kernel and bias gradients on the CPU as im2col + GEMM:
// the input patches of a chunk of images gathered into a matrix col, then
// [dW; db] (+)= col^T . dy[pixel, out_c] with oneDNN's dnnl_sgemm (its jit
// GEMM). col has a column of ones after each patch, so the same GEMM sums
// dy into the bias gradient (its last row) as it streams dy once.
// With a single input channel (the cnn's conv1) it is 1.3-3x faster than
// oneDNN 2.6's jit:avx2 backward-weights primitive at one thread; with 32
// input channels and a bias (the cnn's conv2) 1.26-1.45x since its gather
// copies whole kernel rows with memcpy (bench/RESULTS.md). MakeDnnlConv
// picks it for those two cases (ConvWeightGradient::kFastestMeasured).
//
// col is pixel-major, [pixel, patch + 1] (HWI order within a patch), or,
// with a single input channel, patch-major, [patch + 1, pixel]: a patch
// row there is a run of input pixels, where pixel-major copies k floats at
// a time. Zeros where a patch reaches into the padding.
//
//   Im2colWeightGradient g(spec);         // NHWC activations, HWIO kernel
//   g.Compute(n, x, dy, dw, db);          // db ignored without bias
#pragma once

#include <vector>

#include "worker/model/backend.h"

namespace mirrored::model {

class Im2colWeightGradient {
 public:
  explicit Im2colWeightGradient(const ConvSpec& spec);

  // Overwrites dw [k, k, in_c, out_c] and, when the spec has a bias,
  // db [out_c], from n images x (NHWC) and the pre-activation gradient dy.
  void Compute(int n, const float* x, const float* dy, float* dw, float* db);

 private:
  // col for `count` images from `image` on, leading dimension `ld`.
  void GatherPixelMajor(const float* image, int count, float* col, int ld) const;
  void GatherPatchMajor(const float* image, int count, float* col, int ld) const;
  void GatherPixel(const float* image, int oi, int oj, float* row) const;
  void GatherTapRow(const float* line, int left, float* out) const;
  // Sizes col_ for `images` per chunk and writes its column (row) of ones.
  void Prepare(int images);

  ConvSpec s_;
  bool patch_major_ = false;  // in_c == 1
  int patch_ = 0;             // k * k * in_c
  int chunk_images_ = 1;      // images gathered per GEMM (bounds col's size)
  int prepared_images_ = 0;   // images col_ holds, ones written
  std::vector<float> col_, result_;  // result_: [patch + 1, out_c], dW then db
};

}  // namespace mirrored::model
