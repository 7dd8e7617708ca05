// A chief whose join failed before the job formed serves its error to the
// tasks that register, so they learn it at once (exit 3 or 2, naming it)
// instead of waiting out their registration timeout: from a service that
// knows only that error, when it failed before its own service ran (a bad
// flag, a wrong --data); else from its own service, kept up a while (a task
// started with another cluster than the chief's). JoinAttempt::ReportFailure
// calls these.
//
//   ServeFailureBeforeJoining(config, options, NotFoundError("/data: no such file"),
//                             *config.cluster.AddressOf(config.cluster.ChiefTask()), std::chrono::seconds(10));
//   ServeUntilEveryTaskKnows(*kept_service, *kept_server, std::chrono::seconds(10));
#pragma once

#include <chrono>

#include "common/cluster/cluster_config.h"
#include "common/cluster/host_port.h"
#include "common/status.h"
#include "worker/strategy/strategy_options.h"

namespace mirrored {

namespace coordination {
class CoordinationServer;
class CoordinationService;
}  // namespace coordination

// Hosts, at the chief's address, a coordination service that knows only
// `error` (this chief failed before joining), until every other training
// task has asked to register and been told, `wait` passes, or SIGINT/SIGTERM
// arrives (then the caller exits with the failure's own code). Best effort:
// a port it cannot bind is warned about. Nothing for a job of one task.
void ServeFailureBeforeJoining(const ClusterConfig& config, const StrategyOptions& options, const Status& error,
                               const HostPort& chief_address, std::chrono::milliseconds wait);

// Keeps `server` answering with `service`'s failure (its job error, or its
// registration error) until every training task has heard it (see
// CoordinationService::WaitUntilEveryTaskKnowsFailure), `wait` passes, or
// SIGINT/SIGTERM arrives; then stops `server`. Says so only when some task
// has not heard it yet.
void ServeUntilEveryTaskKnows(coordination::CoordinationService& service, coordination::CoordinationServer& server,
                              std::chrono::milliseconds wait);

}  // namespace mirrored
