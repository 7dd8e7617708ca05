// The CPU replicas of one worker process as one party of the job's
// all-reduce: replicas (threads) reduce among themselves in shared memory,
// then the local leader runs one cross-process collective per operation
// (Gloo), then every replica copies the result. Local replicas never pay TCP.
//
//   CpuReplicaGroup group({.replicas_per_process = {2, 2}, .process_rank = 1}, &gloo_pg);
//   // in replica thread r (0 <= r < 2):
//   Communicator& comm = group.replica(r);      // global rank 2 + r of 4
//   MIRRORED_RETURN_IF_ERROR(comm.AllReduce(grads, n, ReduceOp::kSum));
//
// AllReduceAs(bf16/fp16) follows wire_type.h's rule among the local
// replicas (each buffer rounded as it is read, the sum in FP32, rounded
// once), so that 1 process x 2 replicas computes what 2 processes x 1 do;
// with several processes a process's local sum is rounded again to
// travel (the cross-process group's AllReduceAs).
// One process (no cross-process group): after B1 replica i reduces slice i
// of all L buffers block by block and writes it into every buffer; B2 ends
// the operation. Several processes:
//   B1  every replica has posted its buffer;
//       replica i reduces slice i of all L buffers into replica 0's buffer;
//   B2  the local sum is complete; replica 0 runs the cross-process collective;
//   B3  (kAvg: replica i scales slice i; B3') replica i != 0 copies the result;
//   B4  nobody reads replica 0's buffer any more: every caller may return.
// Invariants: operations are matched by per-replica sequence numbers; a
// mismatch (different count or op) fails every replica with Internal.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "worker/comm/communicator.h"
#include "worker/comm/phase_barrier.h"
#include "worker/comm/process_group.h"
#include "worker/comm/replica_group.h"

namespace mirrored {

struct CpuReplicaGroupOptions {
  // Replicas of every worker process, in process-rank order (may differ).
  std::vector<int> replicas_per_process = {1};
  int process_rank = 0;
  std::chrono::milliseconds timeout{300000};  // per operation (the watchdog)
  // Counts the operations local replica 0 starts (null: not counted); the
  // coordination agent reports it with its heartbeats, so a task whose
  // operation timed out can tell which tasks never started it.
  std::shared_ptr<std::atomic<uint64_t>> collectives_started = nullptr;
};

class CpuReplicaGroup final : public ReplicaGroup {
 public:
  // `cross` may be null when there is a single process; it must outlive the
  // group and is used only from local replica 0's thread.
  CpuReplicaGroup(CpuReplicaGroupOptions options, ProcessGroup* cross);
  ~CpuReplicaGroup() override;

  int local_replicas() const override { return local_size_; }
  Communicator& replica(int local_rank) override;

  // Fails every pending and future operation with `reason` (Aborted).
  void Abort(const Status& reason) override;
  void Returned(int local_rank) override { barrier_.Leave(local_rank); }
  void Starting() override { barrier_.RejoinAll(); }

 private:
  class ReplicaCommunicator;
  enum class Kind { kAllReduce, kBroadcast, kBarrier };
  struct Post {
    Kind kind = Kind::kBarrier;
    float* data = nullptr;
    size_t count = 0;
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
    unsigned long long seq = 0;
    WireType wire = WireType::kFp32;  // all-reduce only
  };

  Status Run(int local_rank, Post post);
  Status RunCollective(int local_rank, const Post& post, PhaseBarrier::Clock::time_point deadline);
  // Every local replica posted the same collective (after B1).
  Status CheckPostsMatch() const;
  // Replica 0's part between B2 and B3: `post` on `result` (replica 0's
  // buffer) across processes, when there are several.
  Status RunCrossProcess(const Post& post, float* result);
  Status Describe(const Status& s, const Post& post, std::chrono::steady_clock::time_point start) const;

  CpuReplicaGroupOptions options_;
  ProcessGroup* cross_;
  int local_size_;
  int rank_offset_;
  int world_size_;
  PhaseBarrier barrier_;
  std::vector<Post> posts_;           // slot per local replica, written before B1
  std::vector<unsigned long long> seq_;
  Status cross_status_;               // written by replica 0 between B2 and B3
  std::vector<std::unique_ptr<ReplicaCommunicator>> communicators_;
};

}  // namespace mirrored
