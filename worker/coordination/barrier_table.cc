#include "worker/coordination/barrier_table.h"

#include <utility>

namespace mirrored::coordination {

void BarrierTable::Arrive(const std::string& name, int index, int64_t now_ms, int64_t timeout_ms,
                          StatusCallback done, Deferred* deferred) {
  auto [it, fresh] = barriers_.try_emplace(name);
  Barrier& b = it->second;
  if (fresh) {
    b.arrived = ArrivalSet(participants_);
    b.timeout_ms = timeout_ms;
    b.deadline_ms = now_ms + timeout_ms;
  }
  b.arrived.Insert(index);
  b.waiters.push_back(std::move(done));
  if (b.arrived.size() < participants_) return;
  for (auto& d : b.waiters) deferred->push_back([d = std::move(d)] { d(OkStatus()); });
  barriers_.erase(it);
}

void BarrierTable::Expire(int64_t now_ms, const DescribeAbsent& absent, Deferred* deferred) {
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (it->second.deadline_ms > now_ms) {
      ++it;
      continue;
    }
    const Status s = DeadlineExceededError(
        "barrier \"" + it->first + "\" timed out after " + std::to_string(it->second.timeout_ms) +
        " ms; tasks that did not arrive: " + absent(it->second.arrived.ToSet()));
    for (auto& d : it->second.waiters) deferred->push_back([d = std::move(d), s] { d(s); });
    it = barriers_.erase(it);
  }
}

void BarrierTable::FailAll(const Status& error, Deferred* deferred) {
  for (auto& [name, b] : barriers_) {
    for (auto& d : b.waiters) deferred->push_back([d = std::move(d), error] { d(error); });
  }
  barriers_.clear();
}

}  // namespace mirrored::coordination
