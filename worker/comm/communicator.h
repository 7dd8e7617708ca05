// The collective operations every replica uses, whatever carries them: NCCL
// for GPU replicas, shared memory + Gloo for CPU replicas.
//
//   Communicator& comm = ...;                   // one per replica
//   MIRRORED_RETURN_IF_ERROR(comm.AllReduce(grads, n, ReduceOp::kSum));
//   MIRRORED_RETURN_IF_ERROR(comm.Broadcast(weights, n, /*root=*/0));
//   MIRRORED_RETURN_IF_ERROR(comm.AllReduceAs(WireType::kBf16, grads, n, ReduceOp::kSum));
//
// Buffers are in the memory of the replica's device (device pointers for GPU
// replicas); the *Host variants take host memory on every device.
//
// Contract: every replica of the job calls the same operations in the same
// order with the same counts (they are matched by their sequence number).
// Each operation either completes, or returns an error that names the
// operation, its sequence number and how long it waited:
//   DeadlineExceeded  the operation outlived the communicator's timeout
//   Aborted           Abort() was called (e.g. a peer failed)
//   Unavailable       the transport lost a peer
// After an error the communicator is unusable; the job restarts.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "worker/comm/reduce_op.h"
#include "worker/comm/wire_type.h"

namespace mirrored {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This replica's global rank and the number of replicas in sync.
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In place: data holds the reduction over all replicas on return.
  virtual Status AllReduce(float* data, size_t count, ReduceOp op) = 0;
  // In place: every replica's data becomes root's.
  virtual Status Broadcast(float* data, size_t count, int root) = 0;
  // AllReduce whose contributions travel as `wire` (--allreduce-dtype, for
  // gradient buckets), by wire_type.h's rule; data stays FP32 on both ends.
  // kFp32 is AllReduce. This default keeps the rule over an FP32
  // AllReduce, rounding in HOST memory: a transport that moves the bytes
  // (or keeps its buffers on a device) overrides it to move 16 bits.
  virtual Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op);
  virtual Status Barrier() = 0;

  // The same on HOST memory, whatever memory the replica's tensors live in:
  // for small host-side values (metric sums, weight fingerprints, a resume
  // header), not tensors. A GPU communicator stages them through a device
  // buffer; a CPU communicator's buffers are host memory already.
  virtual Status AllReduceHost(float* data, size_t count, ReduceOp op) { return AllReduce(data, count, op); }
  virtual Status BroadcastHost(float* data, size_t count, int root) { return Broadcast(data, count, root); }

  // Makes pending and future operations fail with Aborted(reason). Safe from
  // any thread, e.g. the coordination agent's error callback.
  virtual void Abort(const Status& reason) = 0;
};

}  // namespace mirrored
