// The reductions a Communicator offers, and the element-wise kernel that
// applies one.
//
//   ReduceInto(dst, src, n, ReduceOp::kSum);   // dst[i] += src[i]
//   std::string_view name = ReduceOpName(ReduceOp::kAvg);   // "avg"
#pragma once

#include <cstddef>
#include <string_view>

namespace mirrored {

// kAvg is kSum followed by a division by the number of replicas (the world
// size), the way NCCL's ncclAvg and tf.distribute's ReduceOp.MEAN behave.
enum class ReduceOp { kSum, kAvg, kMax };

std::string_view ReduceOpName(ReduceOp op);

// dst[i] = dst[i] (op) src[i] for i < n; kAvg accumulates like kSum.
void ReduceInto(float* dst, const float* src, size_t n, ReduceOp op);

// One pass over two contributions, in ReduceInto's left-to-right order:
// ReduceTwo: out[i] = a[i] (op) b[i]; ReduceTwoInto: out[i] = (out[i] (op)
// a[i]) (op) b[i]. No argument may overlap another.
void ReduceTwo(float* out, const float* a, const float* b, size_t n, ReduceOp op);
void ReduceTwoInto(float* out, const float* a, const float* b, size_t n, ReduceOp op);

// data[i] *= factor.
void Scale(float* data, size_t n, float factor);

}  // namespace mirrored
