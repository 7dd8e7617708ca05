// ProcessGroup over several hosts with several worker processes each: the
// processes of a host meet in shared memory, one process per host (its
// leader, local rank 0) meets the other hosts' leaders over Gloo.
//
//   HostLayout layout = HostLayout::FromHostKeys({"a", "a", "b", "b"});   // 2 hosts x 2
//   HierarchicalProcessGroup pg(rank, layout, std::move(shm), std::move(leaders_or_null));
//   MIRRORED_RETURN_IF_ERROR(pg.AllReduce(buf, n, ReduceOp::kSum));
//
// An all-reduce is a host's all-reduce in shared memory, the leaders' over
// Gloo, then a broadcast from the leader in shared memory: each host's
// bytes cross the network once per step, not once per process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/comm/process_group.h"

namespace mirrored {

// Which host each process of a group is on, and its place there.
struct HostLayout {
  std::vector<int> host_of;        // per process rank: its host's number (hosts in order of first process)
  std::vector<int> local_rank_of;  // per process rank: its place among its host's processes
  std::vector<int> leader_of_host; // per host: the rank of its first process
  std::vector<int> size_of_host;   // per host: its processes

  // From each process's host key, in rank order.
  static HostLayout FromHostKeys(const std::vector<std::string>& keys);
  int hosts() const { return static_cast<int>(leader_of_host.size()); }
};

class HierarchicalProcessGroup : public ProcessGroup {
 public:
  // `local`: this host's processes (rank = local rank); `leaders`: the
  // hosts' leaders (rank = host number), for the leader alone (null on the
  // others).
  HierarchicalProcessGroup(int rank, HostLayout layout, std::unique_ptr<ProcessGroup> local,
                           std::unique_ptr<ProcessGroup> leaders);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(layout_.host_of.size()); }
  Status AllReduce(float* data, size_t count, ReduceOp op) override;
  // 16 bits in each half: a host's rounded sum is its leader's contribution.
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override;
  Status Broadcast(float* data, size_t count, int root_process) override;
  Status Barrier() override;
  void Abort() override;

 private:
  bool leader() const { return leaders_ != nullptr; }

  int rank_;
  HostLayout layout_;
  std::unique_ptr<ProcessGroup> local_;
  std::unique_ptr<ProcessGroup> leaders_;
};

}  // namespace mirrored
