#include "worker/strategy/failure_serving.h"

#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/seconds_text.h"
#include "common/signal_name.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/strategy/local_addresses.h"

namespace mirrored {
namespace {

// A SIGINT or SIGTERM while the chief serves its failure: stop serving and
// exit with the failure's own code (a launcher stopping the job reads that,
// not "stopped").
volatile sig_atomic_t g_serve_stop_signal = 0;
void OnServeStopSignal(int sig) { g_serve_stop_signal = sig; }

}  // namespace

void ServeFailureBeforeJoining(const ClusterConfig& config, const StrategyOptions& options, const Status& error,
                               const HostPort& chief_address, std::chrono::milliseconds wait) {
  namespace co = coordination;
  if (config.NumTrainingTasks() < 2) return;
  co::CoordinationServiceOptions so;
  for (const TaskId& t : config.cluster.TrainingTasks()) {
    so.tasks.push_back(t.ToString());
    so.cluster += (so.cluster.empty() ? "" : ", ") + t.ToString();
    so.task_hosts.push_back(config.cluster.AddressOf(t)->host);
  }
  so.registration_timeout = std::max(wait, std::chrono::milliseconds(1));
  auto service = co::CoordinationService::Create(so);
  if (!service.ok()) return;
  if (Status reported = (*service)->ReportError(config.task.ToString(), co::CoordinationService::kBeforeJoining, error);
      !reported.ok()) {
    return;
  }
  // No deadline thread: nothing here waits on the service's own clock.
  // TLS files that do not load (the error served here, maybe): served in
  // plaintext, which tasks over TLS refuse at once as a server speaking no
  // TLS (they exit 2 saying so, not at their registration timeout); a task
  // without TLS settings reads the error itself. Only this error is served.
  auto tls = co::TlsCredentials::Load(options.tls);
  if (!tls.ok()) {
    MIRRORED_LOG(WARNING) << "this task's TLS settings do not load (" << tls.status().message()
                          << "): serving its error without TLS; tasks over TLS will report a chief that speaks no TLS";
    tls = co::TlsCredentials();
  }
  auto server =
      co::CoordinationServer::Start(ListenAddress(chief_address), options.job_token, service->get(), *tls);
  if (!server.ok()) {
    MIRRORED_LOG(WARNING) << "cannot serve this error to the other tasks (" << server.status()
                          << "): they wait for it until their registration timeout";
    return;
  }
  ServeUntilEveryTaskKnows(**service, **server, wait);
}

void ServeUntilEveryTaskKnows(coordination::CoordinationService& service, coordination::CoordinationServer& server,
                              std::chrono::milliseconds wait) {
  if (service.WaitUntilEveryTaskKnowsFailure(std::chrono::milliseconds(0)).empty()) {
    server.Stop(/*grace_ms=*/500);
    return;
  }
  // Handlers before the line that says it serves: a signal sent on seeing it
  // ends the serving, not the process.
  struct sigaction stop {}, old_int {}, old_term {};
  stop.sa_handler = &OnServeStopSignal;
  sigemptyset(&stop.sa_mask);
  g_serve_stop_signal = 0;
  sigaction(SIGINT, &stop, &old_int);
  sigaction(SIGTERM, &stop, &old_term);
  MIRRORED_LOG(INFO) << "serving this error at " << server.bound_address()
                     << " to the tasks that register, so they stop instead of waiting for this one (up to "
                     << SecondsText(wait) << ")";
  // In slices: a signal handler cannot notify the wait's condition variable.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<std::string> not_told;
  do {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    not_told = service.WaitUntilEveryTaskKnowsFailure(
        std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(100)));
  } while (!not_told.empty() && g_serve_stop_signal == 0 && std::chrono::steady_clock::now() < deadline);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (g_serve_stop_signal != 0) {
    MIRRORED_LOG(INFO) << "stopped serving this error on " << SignalName(g_serve_stop_signal);
  } else if (!not_told.empty()) {
    std::string names;
    for (const std::string& t : not_told) names += (names.empty() ? "" : ", ") + t;
    MIRRORED_LOG(INFO) << "no word from " << names << " within " << SecondsText(wait)
                       << ": they learn of this error only when their registration times out";
  }
  server.Stop(/*grace_ms=*/500);
}

}  // namespace mirrored
