// Whether a `cluster` task may start, given what authenticates the tasks to
// its coordination service (issue #25, D10): a job token
// (MIRRORED_JOB_TOKEN) or TLS client certificates (MIRRORED_TLS_* or the
// workers' --tls-* flags, with client authentication not turned off). A
// job whose tasks all listen on loopback needs neither; any other needs
// one of them, or --insecure.
//
//   std::vector<std::string> warnings;
//   if (Status s = CheckClusterAuthentication(config, env, worker_args, insecure, &warnings); !s.ok()) ...   // exit 2
#pragma once

#include <string>
#include <vector>

#include "common/cluster/cluster_config.h"
#include "common/cluster/environment_map.h"
#include "common/status.h"

namespace mirrored {

// InvalidArgument saying how to set a token or certificates when a training
// task's address is not loopback and nothing authenticates the tasks (and
// not `insecure`), or naming MIRRORED_JOB_TOKEN when gRPC cannot carry it
// (CheckJobToken). OK otherwise, with what the operator should know in
// `warnings` (no token on loopback; --insecure or a short token off loopback).
Status CheckClusterAuthentication(const ClusterConfig& config, const EnvironmentMap& env,
                                  const std::vector<std::string>& worker_args, bool insecure,
                                  std::vector<std::string>* warnings);

// "worker:1 at 10.0.0.2:2222": the first training task whose host is not
// loopback; "" when every one is.
std::string FirstTaskOffLoopback(const ClusterConfig& config);

// 127.0.0.0/8, ::1, ::ffff:127.x.y.z and "localhost" (not resolved: a name
// could resolve to anything).
bool IsLoopbackHost(const std::string& host);

}  // namespace mirrored
