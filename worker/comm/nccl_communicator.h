// One GPU replica's Communicator: an NCCL communicator on one device with its
// own CUDA stream. Built and owned by NcclReplicaGroup (one per local GPU);
// every operation is issued on the replica's stream and then waited for with
// a deadline, so a hung peer becomes an error instead of a hung process.
//
//   NcclCommunicator& comm = group->replica(r);     // from NcclReplicaGroup
//   float* grads = ...;                             // DEVICE memory on comm.device()
//   MIRRORED_RETURN_IF_ERROR(comm.AllReduce(grads, n, ReduceOp::kAvg));
//
// Buffers are device pointers on device(), not host memory (AllReduceHost /
// BroadcastHost stage host values through a private device buffer). Ordering with the
// caller's own kernels: the data must be ready when an operation is called
// (e.g. the caller synchronised its compute stream, or recorded an event that
// it made stream() wait for), and it is complete on return (the call waits for
// stream()), so any later kernel may read it.
//
// Completion: after issuing, the calling thread polls cudaStreamQuery(stream)
// and ncclCommGetAsyncError(comm) until the work is done, NCCL reports an
// error (Unavailable), Abort() is called (Aborted) or `timeout` passes
// (DeadlineExceeded). Any error aborts the whole replica group: the other
// local replicas must not wait for a partner that has left. Error messages
// name the operation, its sequence number, the rank, the GPU and the wait.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "worker/comm/communicator.h"

namespace mirrored {

// Shared by the communicators of one NcclReplicaGroup: set once, by the
// first Abort (or failed operation); read by every waiting replica.
struct NcclAbortState {
  std::atomic<bool> aborted{false};
  std::mutex mu;
  Status reason;  // guarded by mu; Aborted, set before `aborted` turns true
};

class NcclCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (initialised), `stream` and `scratch` (one
  // device float for Barrier). `abort_group` aborts every communicator of the
  // group; it must be safe from any thread.
  NcclCommunicator(int rank, int world_size, int device, ncclComm_t comm, cudaStream_t stream, float* scratch,
                   std::chrono::milliseconds timeout, std::shared_ptr<NcclAbortState> abort_state,
                   std::function<void(const Status&)> abort_group);
  // Frees the stream and scratch buffer; the group finalises or aborts the
  // NCCL communicator first (DestroyNccl / AbortNccl).
  ~NcclCommunicator() override;

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  // Every operation sets the calling thread's current device to device().
  // `data` is device memory of `count` floats (see the header comment).
  Status AllReduce(float* data, size_t count, ReduceOp op) override;
  // bf16/fp16: `data` narrowed on the device into a private 16-bit buffer,
  // all-reduced as ncclBfloat16/ncclFloat16 (half the bytes), widened back.
  // NCCL sums per hop in the 16-bit type (wire_type.h); every rank gets the
  // same bits.
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override;
  Status Broadcast(float* data, size_t count, int root) override;
  // A one-float all-reduce on a private device buffer.
  Status Barrier() override;
  // Host memory: copied into a private device staging buffer on stream(),
  // reduced there and copied back before returning.
  Status AllReduceHost(float* data, size_t count, ReduceOp op) override;
  Status BroadcastHost(float* data, size_t count, int root) override;

  // Aborts the whole group (see NcclReplicaGroup::Abort).
  void Abort(const Status& reason) override { abort_group_(reason); }

  // For NcclReplicaGroup. AbortNccl: ncclCommAbort once, safe from any thread
  // and concurrently with a waiting operation. ReleaseNccl: ncclCommDestroy
  // after a successful ncclCommFinalize (no operation may be in flight).
  void AbortNccl();
  void ReleaseNccl();
  // Counts the operations this communicator starts into `counter` (null:
  // none), for the coordination agent's heartbeats. Set before the first.
  void CountStartedOperations(std::shared_ptr<std::atomic<uint64_t>> counter) { started_ = std::move(counter); }

  // The raw handle, for group calls (finalize); null once aborted/released.
  ncclComm_t comm_for_group() const { return comm_; }
  // ncclCommGetAsyncError under the handle lock; ncclInvalidUsage once the
  // handle is gone.
  ncclResult_t AsyncError();

 private:
  enum class Kind { kAllReduce, kBroadcast, kBarrier };
  struct Op {
    Kind kind;
    float* data;
    size_t count;
    ReduceOp op;
    int root;
    unsigned long long seq;
    WireType wire;  // all-reduce: what NCCL reduces (kFp32: data itself)
  };

  Status Run(Op op);
  Status Issue(const Op& op);
  Status WaitForCompletion(std::chrono::steady_clock::time_point deadline);
  Status AbortReason();
  Status Describe(const Status& s, const Op& op, std::chrono::steady_clock::time_point start) const;
  // Copies `count` host floats into staging_ (grown as needed) on stream_.
  Status StageIn(const float* host, size_t count);
  // Copies them back and waits for the copy.
  Status StageOut(float* host, size_t count);
  // wire_ holds at least `count` 16-bit elements (grown as needed).
  Status ReserveWire(size_t count);
  // AllReduceAs' last part, once NCCL is done: wire_ widened into data.
  Status WidenResult(const Op& op);

  const int rank_;
  const int world_size_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  cudaStream_t stream_;
  float* scratch_;
  float* staging_ = nullptr;  // host collectives; only the replica's own thread touches it
  size_t staging_capacity_ = 0;
  void* wire_ = nullptr;  // AllReduceAs' 16-bit buffer; the replica's own thread only
  size_t wire_capacity_ = 0;
  std::shared_ptr<NcclAbortState> abort_state_;
  std::function<void(const Status&)> abort_group_;
  unsigned long long seq_ = 0;  // only the replica's own thread touches it
  std::shared_ptr<std::atomic<uint64_t>> started_;

  // Guards comm_: ncclCommAbort frees it, so no NCCL call may use the handle
  // concurrently with (or after) the abort.
  std::mutex comm_mu_;
  ncclComm_t comm_;
};

}  // namespace mirrored
