// Max pooling on the CPU for the NHWC activations of CpuBackend: loops
// over one output row at a time with the channels innermost, vectorised
// (cpu_max_pool_rows.h). oneDNN 2.6's jit:avx2 pooling on NHWC took about
// a third of the cnn's training step (ONEDNN_VERBOSE), more than its
// convolutions. A training Forward keeps each output's argmax, the first
// window element equal to it (ties go to the first maximum in row-major
// window order, as in oneDNN and TensorFlow), so that Backward scatters the
// gradient without reading x again. FoldInputReluMask (backend.h) makes
// Backward pass the gradient only to maxima above 0: the backward of the
// ReLU that produced x, in the same pass.
//
//   std::unique_ptr<PoolKernel> k = MakeCpuMaxPool(spec);
//   k->Forward(n, x, y, /*training=*/true);
//   k->Backward(n, x, y, dy, dx);
#pragma once

#include <memory>

#include "worker/model/backend.h"

namespace mirrored::model {

std::unique_ptr<PoolKernel> MakeCpuMaxPool(const PoolSpec& spec);

}  // namespace mirrored::model
