// coordination_bench: rendezvous time of N agents against one coordination
// service on loopback (register + rank + NCCL id), then the round-trip time
// of a barrier over all N and of a key-value get.
//
//   coordination_bench                       # N = 8 64 256 1024, shared channel
//   coordination_bench --separate-connections --agents 8,64,256
//   coordination_bench --barrier-rounds 20 --kv-gets 2000
//   coordination_bench --client-processes 4 --agents 128,1024
//
// Agents are threads in this process (each runs the agent's heartbeat and
// error-poll threads too: 3 threads per agent). With the shared channel all
// agents multiplex one HTTP/2 connection; --separate-connections gives each
// agent its own TCP connection (as separate processes would have).
// --client-processes P puts the agents in P child processes instead (one
// TCP connection each, client_processes.h; --light-agents: asynchronous
// calls instead of agent threads, light_agents.h): this process then holds only
// the service, and its CPU time is the service's (phases: connections
// accepted, every task registered; the service's CPU until then, per
// second while every agent heartbeats, and per barrier round;
// --error-polls: each light agent also holds its error poll open, as a
// real agent does, so the service has an operation outstanding per task).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/coordination/client_processes.h"
#include "bench/coordination/light_agents.h"
#include "common/logging.h"
#include "mirrored/config.h"
#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_server.h"
#include "worker/coordination/coordination_service.h"
#include "worker/coordination/nccl_unique_id.h"

using namespace mirrored;
using namespace mirrored::coordination;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Row {
  int agents = 0;
  double rendezvous_ms = 0;
  double barrier_ms = 0;   // mean over rounds, as seen by agent 0
  double kv_get_us = 0;    // mean of sequential gets by agent 0
  double shutdown_ms = 0;  // exit barrier of all agents
  // --client-processes only:
  double accepted_ms = 0;     // from the start until the last connection was accepted
  double service_cpu_ms = 0;  // this process's CPU until every task registered
  double clients_cpu_ms = 0;  // the client processes' CPU until then
  double heartbeat_cpu = 0;   // this process's CPU ms per second while every agent heartbeats
  double barrier_service_cpu_ms = 0;  // this process's CPU per barrier round
  double barrier_clients_cpu_ms = 0;  // the client processes' CPU per barrier round
  std::string error;
};

// A barrier round's deadline, and the registration timeout of the
// in-process runs and of the runs with client processes.
constexpr std::chrono::milliseconds kBarrierTimeout{30000};
constexpr std::chrono::milliseconds kRegistrationTimeout{60000};
constexpr std::chrono::milliseconds kProcessesRegistrationTimeout{120000};
constexpr std::chrono::milliseconds kProcessesHeartbeatTimeout{60000};

// How long the service's CPU is measured while the agents only heartbeat.
constexpr std::chrono::seconds kHeartbeatPeriod{3};

double MsBetween(Clock::time_point start, int64_t end_ns) {
  return static_cast<double>(end_ns - start.time_since_epoch().count()) / 1e6;
}

Row RunProcesses(int n, int processes, int barrier_rounds, bool light, bool error_polls) {
  Row row;
  row.agents = n;
  std::vector<std::string> tasks;
  for (int i = 0; i < n; ++i) tasks.push_back(i == 0 ? "chief:0" : "worker:" + std::to_string(i - 1));
  const auto start = Clock::now();
  const double cpu0 = ProcessCpuMs();
  CoordinationServiceOptions so;
  so.tasks = tasks;
  so.registration_timeout = kProcessesRegistrationTimeout;
  // Light agents do not heartbeat during the barrier rounds (their CPU would
  // count as the barriers'): a long run of rounds must not fail them.
  so.heartbeat_timeout = kProcessesHeartbeatTimeout;
  auto service = CoordinationService::Create(so);
  if (!service.ok()) return row.error = service.status().ToString(), row;
  (*service)->StartDeadlineThread();
  auto server = CoordinationServer::Start("127.0.0.1:0", "bench-token", service->get());
  if (!server.ok()) return row.error = server.status().ToString(), row;
  auto children =
      ClientProcesses::Spawn((*server)->bound_address(), n, processes, barrier_rounds, light, error_polls);
  if (!children.ok()) return row.error = children.status().ToString(), row;
  StatusOr<ClientPhases> phases = children->WaitRegistered();
  row.service_cpu_ms = ProcessCpuMs() - cpu0;
  if (!phases.ok()) return children->Go(), row.error = phases.status().ToString(), row;
  row.accepted_ms = MsBetween(start, phases->accepted_ns);
  row.rendezvous_ms = MsBetween(start, phases->registered_ns);
  row.clients_cpu_ms = phases->clients_cpu_ms;
  const double cpu1 = ProcessCpuMs();
  const auto t1 = Clock::now();
  std::this_thread::sleep_until(t1 + kHeartbeatPeriod);  // the period measured, not a wait for an event
  row.heartbeat_cpu = (ProcessCpuMs() - cpu1) / Ms(Clock::now() - t1) * 1000.0;
  const double cpu2 = ProcessCpuMs();
  children->Go();
  Status passed = children->WaitBarriers(&*phases);
  row.barrier_service_cpu_ms = (ProcessCpuMs() - cpu2) / barrier_rounds;
  row.barrier_clients_cpu_ms = phases->barriers_cpu_ms / barrier_rounds;
  const auto exit0 = Clock::now();
  children->Exit();
  Status done = children->WaitDone(&*phases);
  if (!passed.ok()) return row.error = passed.ToString(), row;
  if (!done.ok()) return row.error = done.ToString(), row;
  row.barrier_ms = phases->barrier_ms;
  row.shutdown_ms = MsBetween(exit0, phases->exited_ns);
  (*server)->Stop();
  return row;
}

// Barrier round trips: every agent runs `barrier_rounds` barriers; the mean
// of agent 0's, skipping the first round (it includes threads starting).
double BarrierRounds(std::vector<std::unique_ptr<CoordinationAgent>>& agents, std::vector<Status>& results,
                     int barrier_rounds) {
  std::vector<double> agent0_ms;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < agents.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < barrier_rounds && results[i].ok(); ++r) {
        const auto t0 = Clock::now();
        results[i] = agents[i]->Barrier("bench/" + std::to_string(r), kBarrierTimeout.count());
        if (i == 0) agent0_ms.push_back(Ms(Clock::now() - t0));
      }
    });
  }
  for (auto& t : threads) t.join();
  if (agent0_ms.empty()) return 0;
  double sum = 0;
  for (size_t r = 1; r < agent0_ms.size(); ++r) sum += agent0_ms[r];
  return agent0_ms.size() > 1 ? sum / static_cast<double>(agent0_ms.size() - 1) : agent0_ms[0];
}

Row RunOne(int n, bool separate, int barrier_rounds, int kv_gets) {
  Row row;
  row.agents = n;
  std::vector<std::string> tasks;
  for (int i = 0; i < n; ++i) tasks.push_back(i == 0 ? "chief:0" : "worker:" + std::to_string(i - 1));

  const auto start = Clock::now();
  CoordinationServiceOptions so;
  so.tasks = tasks;
  so.registration_timeout = kRegistrationTimeout;
  auto service = CoordinationService::Create(so);
  if (!service.ok()) return row.error = service.status().ToString(), row;
  (*service)->StartDeadlineThread();
  auto server = CoordinationServer::Start("127.0.0.1:0", "bench-token", service->get());
  if (!server.ok()) return row.error = server.status().ToString(), row;
  const std::string address = (*server)->bound_address();
  std::shared_ptr<grpc::Channel> shared =
      separate ? nullptr : CoordinationClient::MakeChannel(address);

  std::vector<std::unique_ptr<CoordinationAgent>> agents(n);
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      CoordinationAgentOptions o;
      o.service_address = address;
      o.task_name = tasks[i];
      o.job_token = "bench-token";
      o.service_task = tasks[0];
      o.registration_timeout = kRegistrationTimeout;
      o.channel = separate ? CoordinationClient::MakeChannel(address, /*separate_connection=*/true)
                           : shared;
      agents[i] = std::make_unique<CoordinationAgent>(o);
      results[i] = agents[i]->Connect();
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  row.rendezvous_ms = Ms(Clock::now() - start);
  for (int i = 0; i < n; ++i) {
    if (!results[i].ok()) return row.error = tasks[i] + ": " + results[i].ToString(), row;
    if (agents[i]->cluster_view().nccl_unique_id != agents[0]->cluster_view().nccl_unique_id) {
      return row.error = tasks[i] + " got a different NCCL id", row;
    }
  }

  row.barrier_ms = BarrierRounds(agents, results, barrier_rounds);
  for (int i = 0; i < n; ++i) {
    if (!results[i].ok()) return row.error = tasks[i] + ": " + results[i].ToString(), row;
  }

  Status s = agents[0]->KeyValueSet("bench/key", std::string(64, 'x'));
  const auto kv0 = Clock::now();
  for (int k = 0; k < kv_gets && s.ok(); ++k) s = agents[0]->KeyValueTryGet("bench/key").status();
  if (!s.ok()) return row.error = s.ToString(), row;
  row.kv_get_us = Ms(Clock::now() - kv0) * 1000.0 / kv_gets;

  const auto sd0 = Clock::now();
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { results[i] = agents[i]->Shutdown(); });
  for (auto& t : threads) t.join();
  row.shutdown_ms = Ms(Clock::now() - sd0);
  for (int i = 0; i < n; ++i) {
    if (!results[i].ok()) return row.error = tasks[i] + ": " + results[i].ToString(), row;
  }
  agents.clear();
  (*server)->Stop();
  return row;
}

int MainProcesses(const std::vector<int>& counts, int processes, int barrier_rounds, bool light,
                  bool error_polls) {
  std::printf("# coordination_bench: agents in %d client processes (%s, one TCP connection each), "
              "%u hardware threads; this process holds only the service\n",
              processes, light ? "lightweight: asynchronous calls, no thread per agent" : "CoordinationAgents as threads",
              std::thread::hardware_concurrency());
  std::printf("# barrier RTT: agent 0's, mean of the rounds after the first; barrier CPU: per round, all rounds\n");
  if (error_polls) std::printf("# every light agent holds its error poll open; service CPU includes opening them\n");
  std::printf("# %8s  %11s  %22s  %15s  %15s  %14s  %18s  %18s  %15s  %13s\n", "agents", "accepted ms",
              "register+rank+ncclid ms", "service CPU ms", "clients CPU ms", "barrier RTT ms", "barrier svc CPU ms",
              "barrier cli CPU ms", "exit barrier ms", "hb CPU ms/s");
  int rc = 0;
  for (int n : counts) {
    const Row r = RunProcesses(n, processes, barrier_rounds, light, error_polls);
    if (!r.error.empty()) {
      std::printf("  %8d  FAILED: %s\n", n, r.error.c_str());
      rc = 1;
      continue;
    }
    std::printf("  %8d  %11.1f  %22.1f  %15.1f  %15.1f  %14.2f  %18.1f  %18.1f  %15.1f  %13.1f\n", r.agents,
                r.accepted_ms, r.rendezvous_ms, r.service_cpu_ms, r.clients_cpu_ms, r.barrier_ms,
                r.barrier_service_cpu_ms, r.barrier_clients_cpu_ms, r.shutdown_ms, r.heartbeat_cpu);
    std::fflush(stdout);
  }
  std::printf("# done\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--agent-process") return RunAgentProcess(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--light-agent-process") return RunLightAgentProcess(argc, argv);
  std::vector<int> counts = {8, 64, 256, 1024};
  bool separate = false, light = false, error_polls = false;
  int barrier_rounds = 10, kv_gets = 1000, processes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--light-agents") {
      light = true;
    } else if (a == "--error-polls") {
      error_polls = true;
    } else if (a == "--client-processes" && i + 1 < argc) {
      processes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--separate-connections") {
      separate = true;
    } else if (a == "--agents" && i + 1 < argc) {
      counts.clear();
      std::stringstream ss(argv[++i]);
      for (std::string c; std::getline(ss, c, ',');) counts.push_back(std::stoi(c));
    } else if (a == "--barrier-rounds" && i + 1 < argc) {
      barrier_rounds = std::max(2, std::atoi(argv[++i]));
    } else if (a == "--kv-gets" && i + 1 < argc) {
      kv_gets = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--agents 8,64] [--separate-connections | --client-processes P [--light-agents]] "
                   "[--barrier-rounds R] [--kv-gets K]\n", argv[0]);
      return 2;
    }
  }
  SetLogLevel(LogLevel::kWarning);
  if (processes > 0) return MainProcesses(counts, processes, barrier_rounds, light, error_polls);
  std::printf("# coordination_bench: agents as threads on loopback, %s, %u hardware threads\n",
              separate ? "one TCP connection per agent" : "one shared gRPC channel",
              std::thread::hardware_concurrency());
  std::printf("# NCCL id: %s; barrier: mean of %d rounds (first skipped); kv get: mean of %d\n",
              NcclUniqueIdIsReal() ? "real ncclGetUniqueId" : "random bytes (no CUDA)",
              barrier_rounds, kv_gets);
  std::printf("# %8s  %22s  %14s  %14s  %14s\n", "agents", "register+rank+ncclid ms",
              "barrier RTT ms", "kv get RTT us", "exit barrier ms");
  int rc = 0;
  for (int n : counts) {
    const Row r = RunOne(n, separate, barrier_rounds, kv_gets);
    if (!r.error.empty()) {
      std::printf("  %8d  FAILED: %s\n", n, r.error.c_str());
      rc = 1;
      continue;
    }
    std::printf("  %8d  %22.1f  %14.2f  %14.1f  %14.1f\n", r.agents, r.rendezvous_ms,
                r.barrier_ms, r.kv_get_us, r.shutdown_ms);
    std::fflush(stdout);
  }
  std::printf("# done\n");
  return rc;
}
