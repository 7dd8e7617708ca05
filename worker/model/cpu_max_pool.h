// Max pooling on the CPU for the NHWC activations of CpuBackend: plain
// loops over windows with the channels innermost, which the compiler
// vectorises. oneDNN 2.6's jit:avx2 pooling on NHWC took about a third of
// the cnn's training step (ONEDNN_VERBOSE), more than its convolutions.
// No argmax is kept: Backward finds each window's first element equal to
// its output, so ties go to the first maximum in row-major window order,
// as in oneDNN and TensorFlow.
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
