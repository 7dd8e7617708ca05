// coordination_test_task: one training task of a multi-process coordination
// test. Task 0 also hosts the service (binding port 0 and writing the bound
// port to --port-file). Every task registers, passes the "ready" barrier,
// prints READY, then blocks like a collective would (a barrier nobody
// completes, or a key nobody sets) and exits with ExitCodeFor(status).
//
//   coordination_test_task --tasks chief:0,worker:0 --task chief:0 --port-file /tmp/p --token t
//   coordination_test_task --tasks chief:0,worker:0 --task worker:0 --address 127.0.0.1:4321 ...
//   flags: --heartbeat-interval-ms 100 --heartbeat-timeout-ms 1000 --block barrier|kv|exit
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/logging.h"
#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"

using namespace mirrored;
using namespace mirrored::coordination;

namespace {

int Finish(const Status& s, const std::string& task) {
  std::printf("EXIT %s %s\n", task.c_str(), s.ToString().c_str());
  std::fflush(stdout);
  return ExitCodeFor(s);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {{"heartbeat-interval-ms", "100"},
                                              {"heartbeat-timeout-ms", "1000"},
                                              {"block", "barrier"},
                                              {"token", ""}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) return Finish(InvalidArgumentError("bad flag " + key), "?");
    flags[key.substr(2)] = argv[i + 1];
  }
  std::vector<std::string> tasks;
  std::stringstream list(flags["tasks"]);
  for (std::string t; std::getline(list, t, ',');) tasks.push_back(t);
  const std::string task = flags["task"];
  SetLogTag(task);
  const int64_t hb_interval = std::stoll(flags["heartbeat-interval-ms"]);
  const int64_t hb_timeout = std::stoll(flags["heartbeat-timeout-ms"]);

  std::unique_ptr<CoordinationService> service;
  std::unique_ptr<CoordinationServer> server;
  std::string address = flags["address"];
  if (!tasks.empty() && task == tasks[0]) {
    CoordinationServiceOptions so;
    so.tasks = tasks;
    so.heartbeat_timeout = std::chrono::milliseconds(hb_timeout);
    so.registration_timeout = std::chrono::milliseconds(20000);
    so.check_interval = std::chrono::milliseconds(50);
    auto s = CoordinationService::Create(so);
    if (!s.ok()) return Finish(s.status(), task);
    service = std::move(*s);
    service->StartDeadlineThread();
    auto srv = CoordinationServer::Start("127.0.0.1:0", flags["token"], service.get());
    if (!srv.ok()) return Finish(srv.status(), task);
    server = std::move(*srv);
    address = server->bound_address();
    const std::string tmp = flags["port-file"] + ".tmp";
    std::ofstream(tmp) << server->port() << "\n";
    std::rename(tmp.c_str(), flags["port-file"].c_str());
  }

  CoordinationAgentOptions o;
  o.service_address = address;
  o.task_name = task;
  o.job_token = flags["token"];
  o.service_task = tasks.empty() ? "" : tasks[0];
  o.heartbeat_interval = std::chrono::milliseconds(hb_interval);
  o.heartbeat_timeout = std::chrono::milliseconds(hb_timeout);
  o.registration_timeout = std::chrono::milliseconds(20000);
  o.shutdown_timeout = std::chrono::milliseconds(20000);
  CoordinationAgent agent(o);
  Status s = agent.Connect();
  if (s.ok()) s = agent.Barrier("ready", 20000);
  if (s.ok()) {
    std::printf("READY %s\n", task.c_str());
    std::fflush(stdout);
    if (flags["block"] == "barrier") {
      s = agent.Barrier("never-completes", 60000);
    } else if (flags["block"] == "kv") {
      s = agent.KeyValueGet("never/set", 60000).status();
    }
    if (s.ok()) s = agent.Shutdown();
  }
  // After a failure a frozen peer may never read its reply; do not let it
  // hold this task's exit for the whole grace period.
  if (server) server->Stop(s.ok() ? 2000 : 300);
  return Finish(s, task);
}
