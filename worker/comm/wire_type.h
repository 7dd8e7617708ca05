// The element type gradient buckets travel in (--allreduce-dtype), and the
// one rule every transport follows for a 16-bit type, so that every replica
// ends bit-identical and a layout of processes x replicas changes nothing
// that a transport need not change:
//   1. each contribution is rounded to the 16-bit type (round to nearest
//      even; NaN stays NaN; past the largest finite value, infinity);
//   2. the contributions are summed in FP32, in a fixed order;
//   3. the sum is rounded to the 16-bit type once and widened back into the
//      caller's FP32 buffer (kAvg: the rounded sum divided by the replicas,
//      rounded again).
// Where a transport sums per hop in 16 bits (NCCL; Gloo past 2 processes)
// each hop's partial sum is rounded: docs/training.md, "Mixed precision".
//
//   MIRRORED_ASSIGN_OR_RETURN(WireType w, ParseWireType("bf16"));
//   MIRRORED_RETURN_IF_ERROR(comm.AllReduceAs(w, grads, n, ReduceOp::kSum));
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace mirrored {

enum class WireType { kFp32, kBf16, kFp16 };

// InvalidArgument naming --allreduce-dtype and the allowed values otherwise.
StatusOr<WireType> ParseWireType(const std::string& text);
// "fp32", "bf16", "fp16".
const char* WireTypeName(WireType w);
// Bytes per element on the wire.
inline size_t WireBytes(WireType w) { return w == WireType::kFp32 ? 4 : 2; }

}  // namespace mirrored
