// The local replicas of one worker process as ranks of the job's
// communicator, whatever carries it: CpuReplicaGroup (shared memory + Gloo)
// or NcclReplicaGroup (one NCCL communicator per local GPU). MirroredStrategy
// holds one and hands replica r's communicator to replica thread r.
//
//   std::unique_ptr<ReplicaGroup> group = ...;          // CPU or GPU
//   Communicator& comm = group->replica(r);             // in replica thread r
//   group->Abort(AbortedError("worker:1 failed"));      // from any thread
#pragma once

#include "common/status.h"
#include "worker/comm/communicator.h"

namespace mirrored {

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;

  virtual int local_replicas() const = 0;
  // Local replica `local_rank`'s communicator (0 <= local_rank < local_replicas()).
  virtual Communicator& replica(int local_rank) = 0;
  // Pending and future operations of every local replica fail with Aborted
  // carrying `reason`; the first reason wins. Safe from any thread.
  virtual void Abort(const Status& reason) = 0;
  // Local replica `local_rank` returned from the replica function: an
  // operation another local replica waits in for it fails at once instead
  // of at the timeout, where the group can tell (CPU replicas). Starting()
  // readmits every replica (before a new round of replica functions).
  virtual void Returned(int /*local_rank*/) {}
  virtual void Starting() {}
};

}  // namespace mirrored
