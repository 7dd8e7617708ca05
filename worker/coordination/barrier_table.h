// BarrierTable: the named barriers of the coordination service. Not
// thread-safe: the service calls it under its own lock, and it hands back
// the callbacks to run once that lock is released.
//
//   BarrierTable barriers(/*participants=*/4);
//   barriers.Arrive("step/10", task_index, now_ms, 30000, done, &deferred);
//   barriers.Expire(now_ms, describe_absent, &deferred);   // deadline thread
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/coordination/arrival_set.h"

namespace mirrored::coordination {

class BarrierTable {
 public:
  using StatusCallback = std::function<void(const Status&)>;
  using Deferred = std::vector<std::function<void()>>;
  // Names the participants missing from `arrived`, for timeout messages.
  using DescribeAbsent = std::function<std::string(const std::set<int>&)>;

  explicit BarrierTable(size_t participants) : participants_(participants) {}

  // Participant `index` arrives at `name`. The first arrival fixes the
  // deadline (now_ms + timeout_ms). When every participant has arrived, all
  // waiters get OK and the name is free for reuse.
  void Arrive(const std::string& name, int index, int64_t now_ms, int64_t timeout_ms,
              StatusCallback done, Deferred* deferred);
  // Barriers whose deadline is <= now_ms fail with DeadlineExceeded naming
  // the participants that did not arrive.
  void Expire(int64_t now_ms, const DescribeAbsent& absent, Deferred* deferred);
  // Every pending barrier fails with `error`.
  void FailAll(const Status& error, Deferred* deferred);

 private:
  struct Barrier {
    int64_t deadline_ms = 0;
    int64_t timeout_ms = 0;
    ArrivalSet arrived;
    std::vector<StatusCallback> waiters;
  };

  const size_t participants_;
  std::map<std::string, Barrier> barriers_;
};

}  // namespace mirrored::coordination
