// A reusable barrier for the replica threads of one process, with a deadline
// and an abort switch, that can say who has not arrived.
//
//   PhaseBarrier barrier(4);
//   Status s = barrier.Arrive(local_rank, deadline);   // OK, DeadlineExceeded or Aborted
//   barrier.Abort(AbortedError("worker:1 failed"));    // wakes every waiter
//   barrier.Leave(1);       // party 1 will not come again: waiting for it fails at once
//   barrier.RejoinAll();    // every party takes part again (nobody waiting)
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "common/status.h"

namespace mirrored {

class PhaseBarrier {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PhaseBarrier(int parties);

  // Blocks until all parties arrived in this phase. Errors:
  //   DeadlineExceeded "waited <ms> ms for local replicas [2, 3] (2 of 4 arrived)"
  //   Internal         "local replicas [1] returned from the replica function ..." (Leave)
  //   Aborted          the reason given to Abort()
  // An error breaks the barrier for every party.
  Status Arrive(int party, Clock::time_point deadline);
  void Abort(const Status& reason);
  // `party` has returned from the replica function: a phase it has not
  // arrived in can never complete, and fails at once for its waiters.
  void Leave(int party);
  void RejoinAll();

 private:
  const int parties_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long long phase_ = 0;
  std::vector<unsigned long long> arrived_in_phase_;  // per party: last phase+1 it arrived in
  std::vector<bool> left_;                            // per party: Leave() since RejoinAll()
  Status abort_reason_;
};

}  // namespace mirrored
