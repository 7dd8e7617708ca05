// ProcessGroup over Gloo's TCP transport: one participant per worker
// process, meeting through any gloo::rendezvous::Store (the coordination
// service's key-value store in a job; gloo's HashStore in tests).
//
//   auto pg = GlooProcessGroup::Connect(store, {.rank = 1, .size = 2, .prefix = "gen0/grads"});
//   if (!pg.ok()) return pg.status();
//   MIRRORED_RETURN_IF_ERROR((*pg)->AllReduce(buf, n, ReduceOp::kSum));
//
// Each Connect opens its own full mesh of TCP pairs, bound to an ephemeral
// port on `interface_address` (no port to configure, nothing to clash).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "worker/comm/process_group.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace mirrored {

struct GlooProcessGroupOptions {
  int rank = 0;
  int size = 1;
  std::string prefix = "gloo";               // keeps meshes of one store apart
  std::string interface_address = "127.0.0.1";  // the address peers reach us on
  std::chrono::milliseconds timeout{300000};
};

class GlooProcessGroup : public ProcessGroup {
 public:
  // Errors: Unavailable (a peer cannot be reached), DeadlineExceeded (the
  // rendezvous outlived the timeout), InvalidArgument (rank/size).
  static StatusOr<std::unique_ptr<GlooProcessGroup>> Connect(gloo::rendezvous::Store& store,
                                                             const GlooProcessGroupOptions& options);
  ~GlooProcessGroup() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  Status AllReduce(float* data, size_t count, ReduceOp op) override;
  // bf16/fp16: 2 bytes an element over TCP. Gloo's ring sums per hop in
  // the 16-bit type (each hop's FP32 sum rounded): wire_type.h's rule
  // exactly for 2 processes, a rounding per hop beyond; every process still
  // gets the same bits (each chunk is reduced once, then copied).
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override;
  Status Broadcast(float* data, size_t count, int root_process) override;
  Status Barrier() override;
  // Closes every TCP pair: a peer that never answers cannot hold an
  // operation until its timeout.
  void Abort() override;

 private:
  GlooProcessGroup(GlooProcessGroupOptions options, std::shared_ptr<gloo::Context> context)
      : options_(std::move(options)), context_(std::move(context)) {}
  uint32_t NextTag() { return tag_++; }

  GlooProcessGroupOptions options_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 1;
  std::vector<uint16_t> wire_buffer_;  // AllReduceAs' 16-bit copy, reused
  std::atomic<bool> aborted_{false};
};

}  // namespace mirrored
