// The chief that fails before the job formed serves its error in place of
// the job's coordination service, so the tasks that register learn it at
// once (exit 3 naming it) instead of waiting out their registration timeout.
// MirroredStrategy::ReportFailureBeforeJoining calls it on the chief.
//
//   ServeFailureBeforeJoining(config, options, NotFoundError("/data: no such file"),
//                             *config.cluster.AddressOf(config.cluster.ChiefTask()), std::chrono::seconds(10));
#pragma once

#include <chrono>

#include "common/cluster/cluster_config.h"
#include "common/cluster/host_port.h"
#include "common/status.h"
#include "worker/train/mirrored_strategy.h"

namespace mirrored {

// Hosts, at the chief's address, a coordination service that knows only
// `error` (this chief failed before joining), until every other training
// task has asked to register and been told, `wait` passes, or SIGINT/SIGTERM
// arrives (then the caller exits with the failure's own code). Best effort:
// a port it cannot bind is warned about. Nothing for a job of one task.
void ServeFailureBeforeJoining(const ClusterConfig& config, const StrategyOptions& options, const Status& error,
                               const HostPort& chief_address, std::chrono::milliseconds wait);

}  // namespace mirrored
