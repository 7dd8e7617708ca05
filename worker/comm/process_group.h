// Collectives between the worker processes of a job, one participant per
// process (the local leader replica). The cross-process half of the
// hierarchical CPU communicator; Gloo carries it (GlooProcessGroup).
//
//   ProcessGroup& pg = ...;                     // rank() = this worker's index
//   MIRRORED_RETURN_IF_ERROR(pg.AllReduce(buf, n, ReduceOp::kSum));
//   MIRRORED_RETURN_IF_ERROR(pg.Broadcast(buf, n, /*root_process=*/0));
//   MIRRORED_RETURN_IF_ERROR(pg.AllReduceAs(WireType::kBf16, buf, n, ReduceOp::kSum));
#pragma once

#include <cstddef>

#include "common/status.h"
#include "worker/comm/reduce_op.h"
#include "worker/comm/wire_type.h"

namespace mirrored {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // kAvg is not divided here: the caller knows the replica count.
  // Errors: DeadlineExceeded (timeout), Unavailable (a peer is gone).
  virtual Status AllReduce(float* data, size_t count, ReduceOp op) = 0;
  // The same with this process's contribution travelling as `wire`
  // (wire_type.h's rule; kAvg not divided either): on return data holds
  // the sum rounded to `wire`, as FP32. kFp32 is AllReduce. This default
  // keeps the rule over an FP32 AllReduce; a transport overrides it to
  // move 16 bits.
  virtual Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op);
  virtual Status Broadcast(float* data, size_t count, int root_process) = 0;
  virtual Status Barrier() = 0;
  // Makes the in-flight and later operations fail promptly (e.g. a peer is
  // frozen and the job is aborting). Safe from any thread.
  virtual void Abort() = 0;
};

}  // namespace mirrored
