#include "worker/coordination/exit_barrier.h"

#include <utility>

namespace mirrored::coordination {

bool ExitBarrier::Arrive(int index, int64_t now_ms, StatusCallback done, Deferred* deferred) {
  if (arrived_.empty()) deadline_ms_ = now_ms + timeout_ms_;
  arrived_.Insert(index);
  waiters_.push_back(std::move(done));
  if (arrived_.size() != participants_) return false;
  for (auto& d : waiters_) deferred->push_back([d = std::move(d)] { d(OkStatus()); });
  waiters_.clear();
  return true;
}

void ExitBarrier::Expire(int64_t now_ms, const DescribeAbsent& absent, Deferred* deferred) {
  if (waiters_.empty() || now_ms < deadline_ms_) return;
  const Status s = DeadlineExceededError("exit barrier timed out after " + std::to_string(timeout_ms_) +
                                         " ms; tasks still running: " + absent(arrived_.ToSet()));
  for (auto& d : waiters_) deferred->push_back([d = std::move(d), s] { d(s); });
  waiters_.clear();
}

void ExitBarrier::FailAll(const Status& error, Deferred* deferred) {
  for (auto& d : waiters_) deferred->push_back([d = std::move(d), error] { d(error); });
  waiters_.clear();
}

}  // namespace mirrored::coordination
