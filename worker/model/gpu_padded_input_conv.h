// A convolution whose padding differs before and after (TensorFlow's "same"
// at stride 2 or with an even kernel: one more pixel at the bottom / right)
// on the GPU, where cuDNN's convolution descriptor pads both sides of an
// axis alike. The difference is padded explicitly: the input is copied into
// a larger zeroed image (the extra rows and columns on the longer side),
// and an inner kernel convolves that copy with the symmetric remainder,
// min(before, after) on each side. The windows are exactly the spec's. The
// input gradient comes out for the copy and is cropped back. Only built
// with MIRRORED_WITH_CUDA.
//
//   // (as MakeCudnnConv does) spec: 28x28, 3x3, stride 2, padding 0 before
//   // and 1 after on each axis
//   ConvSpec inner = SymmetricPart(spec);   // 29x29, padding 0
//   auto k = MakePaddedInputConv(&ctx, spec, std::make_unique<CudnnConv>(&ctx, inner));
//   k->Forward(n, x, w, b, y);   // y 14x14, as the spec says; on ctx.stream
#pragma once

#include <memory>

#include "worker/model/backend.h"
#include "worker/model/gpu_cudnn_kernels.h"

namespace mirrored::model {

// The spec of the convolution the inner kernel runs: the input grown by
// the explicit padding, the padding min(before, after) on each side. Its
// output shape is the spec's.
ConvSpec SymmetricPart(const ConvSpec& spec);

// `inner` was made for SymmetricPart(spec), on ctx's stream (NCHW FP32
// activations, as every GPU conv kernel takes them).
std::unique_ptr<ConvKernel> MakePaddedInputConv(GpuContext* ctx, const ConvSpec& spec,
                                                std::unique_ptr<ConvKernel> inner);

}  // namespace mirrored::model
