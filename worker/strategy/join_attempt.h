// One MirroredStrategy::Create call's way toward the job, kept so that its
// failure reaches the job's other training tasks once: a failure before it
// reached the job's coordination service is reported to that service (the
// chief, which hosts it, serves the error in its place); after, the service
// told the tasks itself, and a chief keeps it answering the tasks still to
// register with the error, instead of taking it away with its exit.
//
//   JoinAttempt attempt;                              // one per Create call
//   auto strategy = MirroredStrategy::Create(config, options, &attempt);
//   if (!strategy.ok()) attempt.ReportFailure(config, options, strategy.status());   // once the error is said
#pragma once

#include <chrono>
#include <memory>

#include "common/cluster/cluster_config.h"
#include "common/status.h"
#include "worker/strategy/strategy_options.h"

namespace mirrored {

namespace coordination {
class CoordinationServer;
class CoordinationService;
}  // namespace coordination

class JoinAttempt {
 public:
  JoinAttempt();
  ~JoinAttempt();  // stops a service kept from a failed Create
  JoinAttempt(const JoinAttempt&) = delete;
  JoinAttempt& operator=(const JoinAttempt&) = delete;

  // Create reached the job's coordination service: as the chief it started
  // it, as another task it asked it to register. From then on the service
  // knows of a failure of the join, or is the one that found it.
  bool reached_service() const { return reached_service_; }

  // Tells the job's other training tasks of `error`, which ended this
  // attempt (or came before it: a bad flag), so that they stop at once,
  // naming it (a launcher does not restart them after a configuration
  // error), instead of waiting for this task until their registration
  // timeout:
  // - before the service was reached: a task tells the chief's service,
  //   waiting up to `wait` for it to be up; the chief, which hosts it,
  //   serves its error in its place;
  // - a chief whose service holds an error that tasks still to register
  //   have not heard (a task was started with another cluster than the
  //   chief's): it keeps that service answering them;
  // - otherwise nothing: the service told every task already (or refused
  //   this task alone: a second process claiming a task).
  // A chief serves until every other task has asked to register and been
  // told, `wait` passes, or SIGINT/SIGTERM arrives (then exit with the
  // error's own code). Best effort (a port another process holds, a task
  // started later than `wait`); an evaluator or a job of one task has no
  // one to tell. Lets go of the kept service; a second call does nothing.
  void ReportFailure(const ClusterConfig& config, const StrategyOptions& options, const Status& error,
                     std::chrono::milliseconds wait = std::chrono::seconds(10));

 private:
  friend class MirroredStrategy;
  // Back to a new attempt's state, stopping a kept service.
  void Reset();

  bool reached_service_ = false;
  bool reported_ = false;
  // The chief's own service and its server, kept from a failed Create while
  // tasks still to register have not heard its error. The server goes first.
  std::unique_ptr<coordination::CoordinationService> service_;
  std::unique_ptr<coordination::CoordinationServer> server_;
};

}  // namespace mirrored
