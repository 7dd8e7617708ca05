// The GPU replicas of one worker process as ranks of the job's NCCL
// communicator: one NcclCommunicator per local GPU, all initialised together
// from the unique id the coordination service handed every task.
//
//   auto group = NcclReplicaGroup::Create({.unique_id = view.nccl_unique_id, .world_size = 4,
//                                          .rank_offset = 2, .devices = {0, 1}});
//   Communicator& comm = (*group)->replica(r);   // in replica thread r: global rank 2 + r
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0), so every NCCL
// call returns at once and ncclCommAbort can always interrupt a wait: Abort()
// is safe from any thread and makes pending and future operations on every
// local replica return Aborted. Threads: replica r's operations are called
// from one thread at a time (normally replica r's own thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/comm/replica_group.h"

namespace mirrored {

struct NcclReplicaGroupOptions {
  std::string unique_id;          // 128 bytes from GenerateNcclUniqueId (same for every task)
  int world_size = 1;             // replicas in the whole job
  int rank_offset = 0;            // global rank of this process's first replica
  std::vector<int> devices = {0};  // CUDA ordinal of each local replica; rank_offset + i for devices[i]
  std::chrono::milliseconds timeout{300000};       // per collective
  std::chrono::milliseconds init_timeout{300000};  // for every rank to join ncclCommInitRank
};

class NcclReplicaGroup final : public ReplicaGroup {
 public:
  // Initialises one communicator per entry of options.devices, inside one
  // ncclGroupStart/End, and waits until every rank of the job has joined.
  // Errors: InvalidArgument (bad options), DeadlineExceeded (some rank did not
  // join within init_timeout), Unavailable/Internal (NCCL or CUDA failed; the
  // message has the call and the library's text).
  static StatusOr<std::unique_ptr<NcclReplicaGroup>> Create(NcclReplicaGroupOptions options);

  // Finalises the communicators (bounded by `timeout`; aborts them if that
  // fails). No operation may be in flight.
  ~NcclReplicaGroup() override;

  int local_replicas() const override { return static_cast<int>(communicators_.size()); }
  NcclCommunicator& replica(int local_rank) override { return *communicators_.at(local_rank); }
  // The CUDA ordinal of each local replica (options.devices).
  const std::vector<int>& devices() const { return options_.devices; }

  // ncclCommAbort on every local communicator; pending and future operations
  // return Aborted(reason). The first reason wins.
  void Abort(const Status& reason) override;

 private:
  NcclReplicaGroup(NcclReplicaGroupOptions options, std::shared_ptr<NcclAbortState> abort_state);

  NcclReplicaGroupOptions options_;
  std::shared_ptr<NcclAbortState> abort_state_;
  std::vector<std::unique_ptr<NcclCommunicator>> communicators_;
};

}  // namespace mirrored
