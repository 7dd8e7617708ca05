// ExitBarrier: the coordination service's barrier at the end of the job.
// Each task arrives once it is done; when every one has, all of them are
// answered OK together. The first arrival fixes the deadline
// (shutdown_timeout from then): past it, the tasks waiting are answered
// DeadlineExceeded naming those still running. Unlike a named barrier
// (BarrierTable) it happens once: arrivals are never forgotten. Not
// thread-safe: the service calls it under its own lock, and it hands back
// the callbacks to run once that lock is released.
//
//   ExitBarrier exit_barrier(/*participants=*/4, /*timeout_ms=*/60000);
//   if (exit_barrier.Arrive(task_index, now_ms, done, &deferred)) { /* every task is done */ }
//   exit_barrier.Expire(now_ms, describe_running, &deferred);   // deadline thread
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/coordination/arrival_set.h"

namespace mirrored::coordination {

class ExitBarrier {
 public:
  using StatusCallback = std::function<void(const Status&)>;
  using Deferred = std::vector<std::function<void()>>;
  // Names the participants missing from `arrived`, for the timeout message.
  using DescribeAbsent = std::function<std::string(const std::set<int>&)>;

  ExitBarrier(size_t participants, int64_t timeout_ms)
      : participants_(participants), timeout_ms_(timeout_ms), arrived_(participants) {}

  // Participant `index` arrives, `done` waits. The first arrival fixes the
  // deadline (now_ms + timeout_ms). Returns true when every participant has
  // arrived: every waiter then gets OK (into `deferred`), and none is left.
  bool Arrive(int index, int64_t now_ms, StatusCallback done, Deferred* deferred);
  // Once the deadline has come (deadline <= now_ms), the waiters fail with
  // DeadlineExceeded naming `absent(arrived)`. Arrivals are kept: a later
  // arrival waits against the same, passed, deadline.
  void Expire(int64_t now_ms, const DescribeAbsent& absent, Deferred* deferred);
  // Every waiter gets `error` (the job error, or the service stopping).
  void FailAll(const Status& error, Deferred* deferred);

 private:
  const size_t participants_;
  const int64_t timeout_ms_;
  ArrivalSet arrived_;
  std::vector<StatusCallback> waiters_;
  int64_t deadline_ms_ = 0;
};

}  // namespace mirrored::coordination
