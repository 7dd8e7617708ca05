// The replica group of a job with one replica in all (one task, one device):
// every collective over a single rank is the identity, so the communicator
// moves nothing and needs no transport. For a GPU replica that means no NCCL
// communicator: its set-up held ~580 MiB of device memory on an H200
// (bench/RESULTS.md, "GPU") and took its share of the start-up, all to
// reduce over one rank. Operations still count (heartbeat progress), check
// their arguments as a larger job would, and fail with Aborted, naming the
// operation and its sequence number, once Abort() was called.
//
//   SoloReplicaGroup group(collectives_started);
//   Communicator& comm = group.replica(0);       // rank 0 of 1
//   MIRRORED_RETURN_IF_ERROR(comm.AllReduce(grads, n, ReduceOp::kSum));  // grads unchanged
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "worker/comm/replica_group.h"

namespace mirrored {

class SoloCommunicator final : public Communicator {
 public:
  explicit SoloCommunicator(std::shared_ptr<std::atomic<uint64_t>> started = nullptr)
      : started_(std::move(started)) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Status AllReduce(float* data, size_t count, ReduceOp op) override;
  // Nothing travels, so nothing is rounded: `wire` changes nothing with one
  // replica in all (the buffer may be device memory).
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override;
  Status Broadcast(float* data, size_t count, int root) override;
  Status Barrier() override;
  void Abort(const Status& reason) override;

 private:
  // Counts the operation; its error once aborted.
  Status Start(const std::string& what);

  std::shared_ptr<std::atomic<uint64_t>> started_;
  std::mutex mu_;
  uint64_t seq_ = 0;  // guarded by mu_
  Status aborted_;    // guarded by mu_; the first Abort's reason
};

class SoloReplicaGroup final : public ReplicaGroup {
 public:
  explicit SoloReplicaGroup(std::shared_ptr<std::atomic<uint64_t>> started = nullptr) : comm_(std::move(started)) {}

  int local_replicas() const override { return 1; }
  Communicator& replica(int local_rank) override;
  void Abort(const Status& reason) override { comm_.Abort(reason); }

 private:
  SoloCommunicator comm_;
};

}  // namespace mirrored
