#include "bench/coordination/client_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "common/logging.h"
#include "worker/coordination/coordination_agent.h"
#include "worker/coordination/coordination_client.h"

extern char** environ;

namespace mirrored::coordination {
namespace {

using Clock = std::chrono::steady_clock;

// How long a child's agents may take to connect and register, and how long
// the parent waits for a child's line.
constexpr std::chrono::milliseconds kAgentTimeout{120000};
// Each barrier round's deadline, as coordination_bench's own.
constexpr std::chrono::milliseconds kBarrierTimeout{30000};
constexpr char kBenchToken[] = "bench-token";

int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

std::string TaskName(int i) { return i == 0 ? "chief:0" : "worker:" + std::to_string(i - 1); }

std::string Errors(const std::vector<Status>& results, int first) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) return TaskName(first + static_cast<int>(i)) + ": " + results[i].ToString();
  }
  return "ok";
}

// Each agent thread runs `body(i)`; returns when all have.
template <typename Body>
void OnEveryAgent(int count, Body body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) threads.emplace_back([&body, i] { body(i); });
  for (auto& t : threads) t.join();
}

struct AgentSlice {
  std::string address;
  int first = 0, count = 0, rounds = 0;
  std::vector<std::unique_ptr<CoordinationAgent>> agents;
  std::vector<Status> results;
};

void ConnectSlice(AgentSlice& s, int64_t* accepted_ns, int64_t* registered_ns) {
  std::atomic<int64_t> accepted{0}, registered{0};
  OnEveryAgent(s.count, [&](int i) {
    CoordinationAgentOptions o;
    o.service_address = s.address;
    o.task_name = TaskName(s.first + i);
    o.job_token = kBenchToken;
    o.service_task = TaskName(0);
    o.registration_timeout = kAgentTimeout;
    o.channel = CoordinationClient::MakeChannel(s.address, /*separate_connection=*/true);
    o.channel->WaitForConnected(std::chrono::system_clock::now() + kAgentTimeout);
    int64_t t = NowNs();
    for (int64_t seen = accepted; seen < t && !accepted.compare_exchange_weak(seen, t);) {}
    s.agents[static_cast<size_t>(i)] = std::make_unique<CoordinationAgent>(o);
    s.results[static_cast<size_t>(i)] = s.agents[static_cast<size_t>(i)]->Connect();
    t = NowNs();
    for (int64_t seen = registered; seen < t && !registered.compare_exchange_weak(seen, t);) {}
  });
  *accepted_ns = accepted;
  *registered_ns = registered;
}

double RunBarriers(AgentSlice& s) {
  std::vector<double> first_agent_ms;
  OnEveryAgent(s.count, [&](int i) {
    for (int r = 0; r < s.rounds && s.results[static_cast<size_t>(i)].ok(); ++r) {
      const auto t0 = Clock::now();
      s.results[static_cast<size_t>(i)] = s.agents[static_cast<size_t>(i)]->Barrier("bench/" + std::to_string(r),
                                                                                  kBarrierTimeout.count());
      if (i == 0) first_agent_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  });
  if (s.first != 0 || first_agent_ms.size() < 2) return -1;
  double sum = 0;
  for (size_t r = 1; r < first_agent_ms.size(); ++r) sum += first_agent_ms[r];
  return sum / static_cast<double>(first_agent_ms.size() - 1);
}

}  // namespace

double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

bool ReportBarriersAndWaitForExit(double rtt_ms, double cpu_ms, const std::string& error) {
  std::printf("barriers %.3f %.1f %s\n", rtt_ms, cpu_ms, error.c_str());
  std::fflush(stdout);
  std::string line;
  return std::getline(std::cin, line) && line == "exit";
}

int RunAgentProcess(int argc, char** argv) {
  if (argc != 7) return 2;
  SetLogLevel(LogLevel::kWarning);
  AgentSlice s;
  s.address = argv[2];
  s.first = std::atoi(argv[3]);
  s.count = std::atoi(argv[4]);
  s.rounds = std::atoi(argv[6]);
  s.agents.resize(static_cast<size_t>(s.count));
  s.results.resize(static_cast<size_t>(s.count));
  int64_t accepted = 0, registered = 0;
  ConnectSlice(s, &accepted, &registered);
  std::printf("registered %lld %lld %.1f %s\n", static_cast<long long>(accepted), static_cast<long long>(registered),
              ProcessCpuMs(), Errors(s.results, s.first).c_str());
  std::fflush(stdout);
  std::string go;
  if (!std::getline(std::cin, go) || go != "go") return 1;
  const double cpu0 = ProcessCpuMs();
  const double barrier_ms = RunBarriers(s);
  if (!ReportBarriersAndWaitForExit(barrier_ms, ProcessCpuMs() - cpu0, Errors(s.results, s.first))) return 1;
  OnEveryAgent(s.count, [&](int i) {
    if (s.results[static_cast<size_t>(i)].ok()) s.results[static_cast<size_t>(i)] = s.agents[static_cast<size_t>(i)]->Shutdown();
  });
  std::printf("done %lld %s\n", static_cast<long long>(NowNs()), Errors(s.results, s.first).c_str());
  std::fflush(stdout);
  s.agents.clear();
  return 0;
}

StatusOr<ClientProcesses> ClientProcesses::Spawn(const std::string& address, int agents, int processes,
                                                 int barrier_rounds, bool light, bool error_polls) {
  ClientProcesses out;
  for (int p = 0; p < processes; ++p) {
    const int first = agents * p / processes, count = agents * (p + 1) / processes - first;
    int in[2], out_pipe[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) return InternalError("pipe for a client process");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    std::vector<std::string> args = {"coordination_bench", light ? "--light-agent-process" : "--agent-process", address, std::to_string(first), std::to_string(count),
                                     std::to_string(agents), std::to_string(barrier_rounds)};
    if (light) args.push_back(error_polls ? "polls" : "no-polls");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    Child child;
    // /proc/self/exe: this very program, wherever it was started from.
    const int rc = posix_spawn(&child.pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out_pipe[1]);
    child.to_child = in[1];
    child.from_child = out_pipe[0];
    if (rc != 0) return InternalError("starting client process " + std::to_string(p) + ": " + std::to_string(rc));
    out.children_.push_back(std::move(child));
  }
  return out;
}

StatusOr<std::string> ClientProcesses::ReadLine(Child& child) {
  for (;;) {
    if (const size_t nl = child.pending.find('\n'); nl != std::string::npos) {
      std::string line = child.pending.substr(0, nl);
      child.pending.erase(0, nl + 1);
      return line;
    }
    char buf[512];
    const ssize_t got = read(child.from_child, buf, sizeof(buf));
    if (got <= 0) return InternalError("client process " + std::to_string(child.pid) + " ended without reporting");
    child.pending.append(buf, static_cast<size_t>(got));
  }
}

StatusOr<ClientPhases> ClientProcesses::WaitRegistered() {
  ClientPhases phases;
  for (Child& c : children_) {
    MIRRORED_ASSIGN_OR_RETURN(const std::string line, ReadLine(c));
    std::istringstream in(line);
    std::string word, error;
    long long accepted = 0, registered = 0;
    double cpu_ms = 0;
    in >> word >> accepted >> registered >> cpu_ms >> std::ws;
    std::getline(in, error);
    if (word != "registered" || error != "ok") return InternalError("client process: " + line);
    phases.accepted_ns = std::max<int64_t>(phases.accepted_ns, accepted);
    phases.registered_ns = std::max<int64_t>(phases.registered_ns, registered);
    phases.clients_cpu_ms += cpu_ms;
  }
  return phases;
}

void ClientProcesses::Tell(const std::string& word) {
  const std::string line = word + "\n";
  for (Child& c : children_) {
    if (write(c.to_child, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      MIRRORED_LOG(WARNING) << "client process " << c.pid << " not told to " << word;
    }
  }
}

Status ClientProcesses::WaitBarriers(ClientPhases* phases) {
  Status first = OkStatus();
  for (Child& c : children_) {
    StatusOr<std::string> line = ReadLine(c);
    std::istringstream in(line.ok() ? *line : "");
    std::string word, error;
    double rtt = -1, cpu = 0;
    in >> word >> rtt >> cpu >> std::ws;
    std::getline(in, error);
    if (rtt >= 0) phases->barrier_ms = rtt;
    phases->barriers_cpu_ms += cpu;
    if (first.ok() && (!line.ok() || word != "barriers" || error != "ok")) {
      first = InternalError("client process " + std::to_string(c.pid) + ": " +
                            (line.ok() ? *line : line.status().ToString()));
    }
  }
  return first;
}

Status ClientProcesses::WaitDone(ClientPhases* phases) {
  Status first = OkStatus();
  for (Child& c : children_) {
    StatusOr<std::string> line = ReadLine(c);
    std::istringstream in(line.ok() ? *line : "");
    std::string word, error;
    long long exited = 0;
    in >> word >> exited >> std::ws;
    std::getline(in, error);
    phases->exited_ns = std::max<int64_t>(phases->exited_ns, exited);
    int wstatus = 0;
    const pid_t pid = c.pid;
    waitpid(pid, &wstatus, 0);
    c.pid = -1;  // reaped
    close(c.to_child);
    close(c.from_child);
    if (first.ok() && (!line.ok() || word != "done" || error != "ok" || wstatus != 0)) {
      first = InternalError("client process " + std::to_string(pid) + ": " +
                            (line.ok() ? *line : line.status().ToString()) + " (wait status " +
                            std::to_string(wstatus) + ")");
    }
  }
  return first;
}

ClientProcesses::~ClientProcesses() {
  for (Child& c : children_) {
    if (c.pid <= 0) continue;
    kill(c.pid, SIGKILL);
    waitpid(c.pid, nullptr, 0);
    close(c.to_child);
    close(c.from_child);
  }
}

}  // namespace mirrored::coordination
