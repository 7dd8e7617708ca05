#include "worker/coordination/error_poll_table.h"

#include <utility>

namespace mirrored::coordination {

uint64_t ErrorPollTable::Open(int task_index, uint64_t incarnation, StatusCallback done) {
  const uint64_t id = next_id_++;
  polls_.emplace(id, Poll{task_index, incarnation, std::move(done)});
  ++open_[{task_index, incarnation}];
  return id;
}

std::optional<ErrorPollTable::Poll> ErrorPollTable::Close(uint64_t id) {
  auto it = polls_.find(id);
  if (it == polls_.end()) return std::nullopt;
  Poll poll = std::move(it->second);
  polls_.erase(it);
  const auto open = open_.find({poll.task_index, poll.incarnation});
  if (--open->second == 0) open_.erase(open);
  return poll;
}

bool ErrorPollTable::IsOpen(int task_index, uint64_t incarnation) const {
  return open_.count({task_index, incarnation}) > 0;
}

void ErrorPollTable::AnswerAll(const Status& status, Deferred* deferred) {
  for (auto& [id, p] : polls_) deferred->push_back([done = std::move(p.done), status] { done(status); });
  polls_.clear();
  open_.clear();
}

}  // namespace mirrored::coordination
