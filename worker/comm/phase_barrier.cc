#include "worker/comm/phase_barrier.h"

#include <sstream>

namespace mirrored {

PhaseBarrier::PhaseBarrier(int parties) : parties_(parties), arrived_in_phase_(parties, 0), left_(parties, false) {}

Status PhaseBarrier::Arrive(int party, Clock::time_point deadline) {
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (!abort_reason_.ok()) return abort_reason_;
  const unsigned long long my_phase = phase_;
  arrived_in_phase_[party] = my_phase + 1;
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++phase_;
    lock.unlock();
    cv_.notify_all();
    return OkStatus();
  }
  // The parties that left without arriving in this phase: it cannot complete.
  auto gone = [&] {
    std::vector<int> out;
    for (int p = 0; p < parties_; ++p)
      if (left_[p] && arrived_in_phase_[p] != my_phase + 1) out.push_back(p);
    return out;
  };
  bool done = cv_.wait_until(lock, deadline,
                             [&] { return phase_ != my_phase || !abort_reason_.ok() || !gone().empty(); });
  if (phase_ != my_phase) return OkStatus();
  if (!abort_reason_.ok()) return abort_reason_;
  (void)done;
  if (const std::vector<int> left = gone(); !left.empty()) {
    std::ostringstream msg;
    msg << "local replica" << (left.size() == 1 ? " " : "s [");
    for (size_t i = 0; i < left.size(); ++i) msg << (i ? ", " : "") << left[i];
    msg << (left.size() == 1 ? "" : "]") << " returned from the replica function while replica " << party
        << " waits for " << (left.size() == 1 ? "it" : "them")
        << ": every replica must issue the same collectives, in the same order";
    abort_reason_ = InternalError(msg.str());
    lock.unlock();
    cv_.notify_all();
    return InternalError(msg.str());
  }
  std::ostringstream msg;
  msg << "waited " << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
      << " ms for local replicas [";
  bool first = true;
  for (int p = 0; p < parties_; ++p) {
    if (arrived_in_phase_[p] == my_phase + 1) continue;
    msg << (first ? "" : ", ") << p;
    first = false;
  }
  msg << "] (" << arrived_ << " of " << parties_ << " arrived)";
  // This party leaves: the barrier is broken for everyone.
  abort_reason_ = DeadlineExceededError(msg.str());
  lock.unlock();
  cv_.notify_all();
  return DeadlineExceededError(msg.str());
}

void PhaseBarrier::Leave(int party) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    left_[party] = true;
  }
  cv_.notify_all();
}

void PhaseBarrier::RejoinAll() {
  std::lock_guard<std::mutex> lock(mu_);
  left_.assign(parties_, false);
}

void PhaseBarrier::Abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_reason_.ok()) abort_reason_ = reason;
  }
  cv_.notify_all();
}

}  // namespace mirrored
