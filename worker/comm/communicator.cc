#include "worker/comm/communicator.h"

#include "worker/comm/half_conversion.h"

namespace mirrored {

Status Communicator::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  if (wire == WireType::kFp32) return AllReduce(data, count, op);
  // Rounded contributions, their FP32 sum, the sum rounded: the rule, with
  // FP32 (holding 16-bit values) on the wire.
  RoundToWire(wire, data, count);
  MIRRORED_RETURN_IF_ERROR(AllReduce(data, count, op == ReduceOp::kAvg ? ReduceOp::kSum : op));
  RoundToWire(wire, data, count);
  if (op == ReduceOp::kAvg) {
    Scale(data, count, 1.0f / static_cast<float>(world_size()));
    RoundToWire(wire, data, count);
  }
  return OkStatus();
}

}  // namespace mirrored
