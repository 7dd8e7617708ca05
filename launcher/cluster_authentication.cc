#include "launcher/cluster_authentication.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "common/launcher_environment.h"

namespace mirrored {
namespace {

// The value of the workers' `flag` ("--tls-cert X" or "--tls-cert=X") after
// `--`, else the launcher's `variable`; "" when neither is set.
std::string WorkerSetting(const EnvironmentMap& env, const std::vector<std::string>& worker_args,
                          const std::string& flag, const char* variable) {
  std::string value;
  bool found = false;
  for (size_t i = 0; i < worker_args.size(); ++i) {  // the last one wins, as in the worker
    if (worker_args[i] == flag && i + 1 < worker_args.size()) {
      value = worker_args[++i];
      found = true;
    } else if (worker_args[i].rfind(flag + "=", 0) == 0) {
      value = worker_args[i].substr(flag.size() + 1);
      found = true;
    }
  }
  if (found) return value;
  return Lookup(env, variable).value_or("");
}

bool HasClientCertificates(const EnvironmentMap& env, const std::vector<std::string>& worker_args) {
  return !WorkerSetting(env, worker_args, "--tls-ca", kTlsCaVariable).empty() &&
         !WorkerSetting(env, worker_args, "--tls-cert", kTlsCertVariable).empty() &&
         !WorkerSetting(env, worker_args, "--tls-key", kTlsKeyVariable).empty() &&
         WorkerSetting(env, worker_args, "--tls-client-auth", kTlsClientAuthVariable) != "none";
}

}  // namespace

std::string FirstTaskOffLoopback(const ClusterConfig& config) {
  for (const TaskId& task : config.cluster.TrainingTasks()) {
    const auto address = config.cluster.AddressOf(task);
    if (address && !IsLoopbackHost(address->host)) return task.ToString() + " at " + address->ToString();
  }
  return "";
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) return false;
  return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
}

Status CheckClusterAuthentication(const ClusterConfig& config, const EnvironmentMap& env,
                                  const std::vector<std::string>& worker_args, bool insecure,
                                  std::vector<std::string>* warnings) {
  // The evaluator, and a task without a cluster, join no service.
  if (config.IsEvaluator() || config.is_single_local_task) return OkStatus();
  const std::string token = Lookup(env, kJobTokenVariable).value_or("");
  MIRRORED_RETURN_IF_ERROR(CheckJobToken(token));
  const std::string exposed = FirstTaskOffLoopback(config);
  if (!token.empty() && token.size() < kShortJobTokenBytes && !exposed.empty()) {
    warnings->push_back(std::string(kJobTokenVariable) + " is only " + std::to_string(token.size()) +
                        " characters long and the cluster is reachable off this host (" + exposed +
                        "): a short token is easy to guess; use 16 random bytes or more (docs/security.md)");
  }
  if (!token.empty() || HasClientCertificates(env, worker_args)) return OkStatus();
  if (exposed.empty()) {
    warnings->push_back("MIRRORED_JOB_TOKEN is not set: the coordination service serves any process of this host");
    return OkStatus();
  }
  if (insecure) {
    warnings->push_back("--insecure: neither MIRRORED_JOB_TOKEN nor TLS client certificates are set: anyone who can "
                        "reach the coordination service can join the job, read its settings or end it");
    return OkStatus();
  }
  return InvalidArgumentError(
      "nothing authenticates the tasks to the coordination service, and the cluster is reachable off this host (" +
      exposed + "): anyone who can reach it could join the job or end it. Set the same secret on every host, e.g. "
      "`export MIRRORED_JOB_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')`, or give every task "
      "TLS client certificates (`mirrored-launch certs`, docs/security.md); --insecure starts it anyway");
}

}  // namespace mirrored
