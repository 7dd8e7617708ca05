#include "worker/coordination/error_poll_table.h"

#include <utility>

namespace mirrored::coordination {

uint64_t ErrorPollTable::Open(int task_index, uint64_t incarnation, StatusCallback done) {
  const uint64_t id = next_id_++;
  polls_.emplace(id, Poll{task_index, incarnation, std::move(done)});
  return id;
}

std::optional<ErrorPollTable::Poll> ErrorPollTable::Close(uint64_t id) {
  auto it = polls_.find(id);
  if (it == polls_.end()) return std::nullopt;
  Poll poll = std::move(it->second);
  polls_.erase(it);
  return poll;
}

bool ErrorPollTable::IsOpen(int task_index, uint64_t incarnation) const {
  for (const auto& [id, poll] : polls_) {
    if (poll.task_index == task_index && poll.incarnation == incarnation) return true;
  }
  return false;
}

void ErrorPollTable::AnswerAll(const Status& status, Deferred* deferred) {
  for (auto& [id, p] : polls_) deferred->push_back([done = std::move(p.done), status] { done(status); });
  polls_.clear();
}

}  // namespace mirrored::coordination
