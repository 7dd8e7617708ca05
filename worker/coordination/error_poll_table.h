// ErrorPollTable: the error polls the coordination service holds open, one
// per task process that joined: each is answered once, with the job error,
// OK when the exit barrier passes, or the service stopping. An open poll is
// also how the service watches its task for a lost connection (the caller
// going away cancels it). Not thread-safe: the service calls it under its
// own lock, and it hands back the callbacks to run once that lock is
// released.
//
//   const uint64_t id = polls.Open(task_index, incarnation, done);
//   std::optional<ErrorPollTable::Poll> gone = polls.Close(id);   // its caller went away
//   polls.AnswerAll(job_error, &deferred);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mirrored::coordination {

class ErrorPollTable {
 public:
  using StatusCallback = std::function<void(const Status&)>;
  using Deferred = std::vector<std::function<void()>>;

  struct Poll {
    int task_index;
    uint64_t incarnation;
    StatusCallback done;
  };

  // A poll of task `task_index`'s process `incarnation`; returns its id
  // (never 0).
  uint64_t Open(int task_index, uint64_t incarnation, StatusCallback done);
  // Takes poll `id` out, unanswered: its caller answers it. nullopt for an
  // unknown or already answered id.
  std::optional<Poll> Close(uint64_t id);
  // Whether process `incarnation` of task `task_index` holds a poll open
  // (a lookup: every registration asks it).
  bool IsOpen(int task_index, uint64_t incarnation) const;
  // Every open poll is answered `status` (into `deferred`) and closed.
  void AnswerAll(const Status& status, Deferred* deferred);
  size_t size() const { return polls_.size(); }

 private:
  std::map<uint64_t, Poll> polls_;
  // Open polls per (task index, incarnation); a process may hold several.
  std::map<std::pair<int, uint64_t>, int> open_;
  uint64_t next_id_ = 1;
};

}  // namespace mirrored::coordination
