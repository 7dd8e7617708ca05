// oneDNN implementations of the per-layer kernels of backend.h: dense
// (matmul with a fused ReLU post-op), convolution (weights reordered from
// HWIO to the implementation's preferred layout, bias + ReLU fused),
// max pooling with its argmax workspace, and batch normalisation.
// Primitives are created once per batch size and reused (bf16's conversion
// reorders once per shape in a row; oneDNN's primitive cache serves a shape
// that comes back). With the context's precision bf16 (--precision bf16, on a CPU with
// AVX512_BF16 or AMX-BF16), dense and convolution products read bf16 copies
// of their inputs, weights and output gradients (rounded to nearest even),
// accumulate in FP32 and write FP32, as the GPU's bf16 products do; every
// other tensor stays FP32. A convolution whose input channels are not a
// multiple of 8 (an image's first layer) stays FP32 on both devices.
//
//   DnnlContext ctx;   // engine + stream, one per CpuBackend
//   ctx.precision = Precision::kBf16;   // after CheckCpuBackendPrecision (backend.h)
//   std::unique_ptr<ConvKernel> k = MakeDnnlConv(&ctx, spec);
//   k->Forward(n, x, w, b, y);
#pragma once

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "worker/model/backend.h"

namespace mirrored::model {

// The oneDNN engine and stream of one CpuBackend. Kernels keep a pointer;
// the backend outlives them.
struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  Precision precision = Precision::kFp32;  // kFp32 or kBf16 (CheckCpuBackendPrecision)
  bool bf16() const { return precision == Precision::kBf16; }
};

// Whether oneDNN instruction set `isa` (a dnnl_cpu_isa_t value, as
// dnnl::get_effective_cpu_isa() returns it) includes bf16 products:
// AVX512_BF16 (0xe7) or a superset of it (AMX, 0x3e7).
bool DnnlIsaHasBf16(unsigned isa);

std::unique_ptr<DenseKernel> MakeDnnlDense(DnnlContext* ctx, const DenseSpec& spec);
// How a convolution's kernel gradient is computed. kFastestMeasured: im2col
// + GEMM (cpu_im2col_weight_gradient.h) for a single input channel (1.3-3x
// faster than oneDNN 2.6's backward-weights primitive on the cnn's conv1)
// or with a bias (1.26-1.45x on the cnn's conv2: the primitive sums the
// bias gradient in a scalar loop, the GEMM in the same pass); that
// primitive otherwise (resnet's convolutions, which have no bias; the GEMM
// measured 1.02-1.39x there too, bench/RESULTS.md, but was slower before
// its gather was vectorised, and is not switched without a quiet re-run).
// The other two force one way (the tests hold the GEMM against the primitive).
// The GEMM is FP32: a bf16 convolution always takes the primitive.
enum class ConvWeightGradient { kFastestMeasured, kOneDnn, kIm2colGemm };

std::unique_ptr<ConvKernel> MakeDnnlConv(DnnlContext* ctx, const ConvSpec& spec,
                                         ConvWeightGradient dw = ConvWeightGradient::kFastestMeasured);
std::unique_ptr<PoolKernel> MakeDnnlMaxPool(DnnlContext* ctx, const PoolSpec& spec);
std::unique_ptr<PoolKernel> MakeDnnlAvgPool(DnnlContext* ctx, const PoolSpec& spec);
std::unique_ptr<BatchNormKernel> MakeDnnlBatchNorm(DnnlContext* ctx, const BatchNormSpec& spec);

}  // namespace mirrored::model
