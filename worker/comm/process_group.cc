#include "worker/comm/process_group.h"

#include "worker/comm/half_conversion.h"

namespace mirrored {

Status ProcessGroup::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  if (wire == WireType::kFp32) return AllReduce(data, count, op);
  RoundToWire(wire, data, count);
  MIRRORED_RETURN_IF_ERROR(AllReduce(data, count, op));
  RoundToWire(wire, data, count);
  return OkStatus();
}

}  // namespace mirrored
