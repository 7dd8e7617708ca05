// A ProcessGroup that checks, before every operation, that every process
// runs the same one: kind, reduction, root and element count, in the same
// order. Without the check, processes that disagree (a custom training loop
// that broadcasts on one task where another all-reduces, or skips a
// collective on one path) hang until the collective timeout or, where the
// sizes happen to line up, silently mix unrelated buffers. With it, every
// process fails at the first operation that differs, naming what each task
// ran. Costs one small all-reduce per operation: a debugging aid, on with
// MIRRORED_CHECK_COLLECTIVES=1 (StrategyOptions::check_collectives), like
// PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL.
//
//   CheckedProcessGroup pg(std::move(gloo_pg), {"worker:0", "worker:1"});
//   Status s = pg.AllReduce(buf, n, ReduceOp::kSum);
//   // FailedPrecondition: "collective #3 differs across tasks: worker:0 ran
//   //   all-reduce (sum) of 10 floats; worker:1 ran broadcast from worker:0 of 10 floats ..."
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/comm/process_group.h"

namespace mirrored {

class CheckedProcessGroup final : public ProcessGroup {
 public:
  // `tasks`: the task of each process rank, for messages.
  CheckedProcessGroup(std::unique_ptr<ProcessGroup> inner, std::vector<std::string> tasks);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  // Errors: the inner group's, and FailedPrecondition (on every process at
  // once) when the processes' operations differ.
  Status AllReduce(float* data, size_t count, ReduceOp op) override;
  Status AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) override;
  Status Broadcast(float* data, size_t count, int root_process) override;
  Status Barrier() override;
  void Abort() override { inner_->Abort(); }

 private:
  // Sent as floats: every value names itself (0 is no operation).
  enum class Kind { kAllReduce = 1, kBroadcast = 2, kBarrier = 3 };
  struct Operation {
    Kind kind = Kind::kBarrier;
    int op = 0;    // ReduceOp, all-reduce only
    int wire = 0;  // WireType, all-reduce only
    int root = 0;  // broadcast only
    uint64_t count = 0;
  };
  Status Check(const Operation& mine);
  std::string Describe(const Operation& o) const;

  std::unique_ptr<ProcessGroup> inner_;
  std::vector<std::string> tasks_;
  uint64_t operations_ = 0;
};

}  // namespace mirrored
