// ProcessGroup through shared memory, for worker processes on one host: the
// cross-process half of the CPU communicator without Gloo's TCP loopback
// (two processes' gradients crossed a socket pair every step, 2.5x slower
// than two replicas in one process).
//
//   auto pg = SharedMemoryProcessGroup::Connect(store, {.rank = 1, .size = 2, .prefix = "gen0"});
//   MIRRORED_RETURN_IF_ERROR((*pg)->AllReduce(buf, n, ReduceOp::kSum));
//
// The segment is a memfd made by rank 0: it has no name, so nothing is left
// behind whatever ends the job (SIGKILL included). The others open it
// through /proc/<pid>/fd/<fd> of rank 0 (published in the store), so every
// member must see rank 0's /proc: same host, same PID namespace, same user
// (SameHostIdentity says when that holds).
//
// An all-reduce goes chunk by chunk. Process i sums share i (1/size of the
// chunk) over every process, in rank order (the same sum on every process,
// whatever the timing), reading its own part from its own memory: so every
// process copies only the other shares into its slot; after a barrier each
// sums its share into the result area and copies it into its own buffer;
// after a second barrier each copies the other shares out. Processes wait
// for each other on a barrier in the segment (a spin, a few yields, then a
// futex on the shared word; no spin when the members outnumber the CPUs),
// with a deadline and an abort flag both local and shared: Abort() wakes
// every waiter at once.
//
// AllReduceAs(bf16/fp16) moves 16 bits: slots and result hold uint16, so
// a chunk is twice as many elements; process i widens share i of every
// slot (rounding its own part), sums in FP32 in rank order and rounds the
// sum once (wire_type.h's rule exactly, whatever the process count).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "worker/comm/process_group.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace mirrored {

struct SharedMemoryProcessGroupOptions {
  int rank = 0;
  int size = 1;
  std::string prefix = "shm";  // keeps groups of one store apart
  std::chrono::milliseconds timeout{300000};
  // Each process's slot (and the result area): an all-reduce larger than
  // this goes in chunks of it. 1 MiB keeps a chunk's slots and result in
  // cache between the copy in, the reduction and the copy out: 4 MiB
  // chunks gave 1.9 GB/s at 16 MiB between 2 processes, 1 MiB 2.6
  // (bench/RESULTS.md).
  size_t slot_bytes = size_t{1024} << 10;
};

class SharedMemoryProcessGroup : public ProcessGroup {
 public:
  // Errors: InvalidArgument (rank/size), DeadlineExceeded (a member did not
  // publish or attach within the timeout), Unavailable (the segment cannot
  // be made or opened: naming the path and why).
  static StatusOr<std::unique_ptr<SharedMemoryProcessGroup>> Connect(gloo::rendezvous::Store& store,
                                                                     const SharedMemoryProcessGroupOptions& options);
  ~SharedMemoryProcessGroup() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  // Errors: DeadlineExceeded naming the operation, its number and the wait;
  // Aborted once Abort() was called here or by any member.
  Status AllReduce(float* data, size_t count, ReduceOp op) override;
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override;
  Status Broadcast(float* data, size_t count, int root_process) override;
  Status Barrier() override;
  void Abort() override;

  struct Header;  // the segment's layout (shared_memory_process_group.cc)

 private:
  SharedMemoryProcessGroup(SharedMemoryProcessGroupOptions options, void* base, size_t bytes);
  // Waits for every member to arrive; `what` names the operation in errors.
  Status Arrive(const char* what);
  float* Slot(int rank) const;
  // An all-reduce of `count` floats in chunks of `chunk_elements`, two
  // barriers each. Per chunk, this process's share is [lo, hi):
  // `copy_in(chunk, at, len)` for each of the other shares' ranges of the
  // chunk, a barrier, `reduce(chunk, lo, hi)`, a barrier, then
  // `copy_out(chunk, at, len)` for the same ranges.
  using CopyStep = std::function<void(float* chunk, size_t at, size_t len)>;
  using ReduceStep = std::function<void(float* chunk, size_t lo, size_t hi)>;
  Status RunChunks(float* data, size_t count, size_t chunk_elements, const CopyStep& copy_in, const ReduceStep& reduce,
                   const CopyStep& copy_out);
  void ReduceShare(float* mine, size_t lo, size_t hi, ReduceOp op) const;
  // The same over 16-bit slots: the result area gets the rounded sum of
  // [lo, hi), and so does `mine`, widened.
  void ReduceShareOnWire(WireType wire, float* mine, size_t lo, size_t hi, ReduceOp op) const;
  uint16_t* Slot16(int rank) const { return reinterpret_cast<uint16_t*>(Slot(rank)); }
  float* Result() const;

  SharedMemoryProcessGroupOptions options_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  Header* header_ = nullptr;
  size_t slot_floats_ = 0;
  int spins_ = 0;  // before a waiter yields (none when the members outnumber the CPUs)
  uint64_t operations_ = 0;  // for error messages
  std::atomic<bool> aborted_{false};
};

// This process's host identity for grouping processes that can share a
// segment: the kernel's boot id, the PID namespace and the user. Processes
// with equal identities can open each other's /proc/<pid>/fd.
std::string SameHostIdentity();

}  // namespace mirrored
