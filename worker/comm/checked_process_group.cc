#include "worker/comm/checked_process_group.h"

#include <cmath>

namespace mirrored {
namespace {

// Floats hold integers exactly up to 2^24: a count is sent in two halves.
constexpr int kFields = 6;
constexpr uint64_t kHalf = uint64_t{1} << 24;

}  // namespace

CheckedProcessGroup::CheckedProcessGroup(std::unique_ptr<ProcessGroup> inner, std::vector<std::string> tasks)
    : inner_(std::move(inner)), tasks_(std::move(tasks)) {}

Status CheckedProcessGroup::AllReduce(float* data, size_t count, ReduceOp op) {
  return AllReduceAs(WireType::kFp32, data, count, op);
}

Status CheckedProcessGroup::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  MIRRORED_RETURN_IF_ERROR(Check(
      {.kind = Kind::kAllReduce, .op = static_cast<int>(op), .wire = static_cast<int>(wire), .count = count}));
  return inner_->AllReduceAs(wire, data, count, op);
}

Status CheckedProcessGroup::Broadcast(float* data, size_t count, int root_process) {
  MIRRORED_RETURN_IF_ERROR(Check({.kind = Kind::kBroadcast, .root = root_process, .count = count}));
  return inner_->Broadcast(data, count, root_process);
}

Status CheckedProcessGroup::Barrier() {
  MIRRORED_RETURN_IF_ERROR(Check({.kind = Kind::kBarrier}));
  return inner_->Barrier();
}

Status CheckedProcessGroup::Check(const Operation& mine) {
  const uint64_t number = ++operations_;
  const int n = inner_->size();
  if (n <= 1) return OkStatus();
  // Every process writes its operation into its own row; the sum gathers
  // every row everywhere, so all processes reach the same verdict.
  std::vector<float> table(static_cast<size_t>(n) * kFields, 0.0f);
  float* row = table.data() + static_cast<size_t>(inner_->rank()) * kFields;
  row[0] = static_cast<float>(static_cast<int>(mine.kind));
  row[1] = static_cast<float>(mine.op);
  row[2] = static_cast<float>(mine.root);
  row[3] = static_cast<float>(mine.count / kHalf % kHalf);
  row[4] = static_cast<float>(mine.count % kHalf);
  row[5] = static_cast<float>(mine.wire);
  if (Status s = inner_->AllReduce(table.data(), table.size(), ReduceOp::kSum); !s.ok()) {
    return Status(s.code(), s.message() + " (checking collective #" + std::to_string(number) +
                                " across tasks, MIRRORED_CHECK_COLLECTIVES)");
  }
  std::vector<Operation> all(static_cast<size_t>(n));
  bool same = true;
  for (int r = 0; r < n; ++r) {
    const float* f = table.data() + static_cast<size_t>(r) * kFields;
    Operation& o = all[static_cast<size_t>(r)];
    o.kind = static_cast<Kind>(std::lround(f[0]));
    o.op = static_cast<int>(std::lround(f[1]));
    o.root = static_cast<int>(std::lround(f[2]));
    o.count = static_cast<uint64_t>(std::llround(f[3])) * kHalf + static_cast<uint64_t>(std::llround(f[4]));
    o.wire = static_cast<int>(std::lround(f[5]));
    same = same && o.kind == mine.kind && o.op == mine.op && o.root == mine.root && o.count == mine.count &&
           o.wire == mine.wire;
  }
  if (same) return OkStatus();
  std::string ran;
  for (int r = 0; r < n; ++r) {
    const std::string task = r < static_cast<int>(tasks_.size()) ? tasks_[static_cast<size_t>(r)]
                                                                  : "process " + std::to_string(r);
    ran += (r ? "; " : "") + task + " ran " + Describe(all[static_cast<size_t>(r)]);
  }
  return FailedPreconditionError("collective #" + std::to_string(number) + " differs across tasks: " + ran +
                                 ". Every task must run the same collectives, of the same size, in the same order "
                                 "(checked because MIRRORED_CHECK_COLLECTIVES is set)");
}

std::string CheckedProcessGroup::Describe(const Operation& o) const {
  const std::string floats = " of " + std::to_string(o.count) + (o.count == 1 ? " float" : " floats");
  switch (o.kind) {
    case Kind::kAllReduce:
      return "all-reduce (" + std::string(ReduceOpName(static_cast<ReduceOp>(o.op))) + ")" + floats +
             (o.wire != 0 ? std::string(" as ") + WireTypeName(static_cast<WireType>(o.wire)) : "");
    case Kind::kBroadcast: {
      const std::string root = o.root >= 0 && o.root < static_cast<int>(tasks_.size())
                                   ? tasks_[static_cast<size_t>(o.root)]
                                   : "process " + std::to_string(o.root);
      return "broadcast from " + root + floats;
    }
    case Kind::kBarrier:
      return "a barrier";
  }
  return "operation kind " + std::to_string(static_cast<int>(o.kind));
}

}  // namespace mirrored
