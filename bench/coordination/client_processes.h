// coordination_bench's agents in several processes: the parent hosts the
// service; each child (this same program, run with --agent-process) runs a
// slice of the agents as threads and reports, over its stdout, when its
// agents' connections were accepted and their registrations answered. The
// parent measures its own CPU (the service's) apart from the clients'.
//
//   parent:  ClientProcesses procs = ClientProcesses::Spawn(argv0, address, n, 4, rounds);
//            procs.WaitRegistered() -> the slowest accept and registration;
//            procs.Go(); procs.WaitBarriers() -> barrier RTT, the clients' CPU;
//            procs.Exit(); procs.WaitDone() -> exit barrier
//   child:   return RunAgentProcess(argc, argv);
//
// Child protocol, a line at a time: "registered <accepted ns> <registered
// ns> <its CPU ms so far> <error or ok>"; the parent answers "go"; the child
// runs its barrier rounds and says "barriers <first agent's RTT ms, -1 but in
// the first child> <its CPU ms in the rounds> <error or ok>"; the parent
// answers "exit"; the child passes the exit barrier and says "done <exit
// barrier end ns> <error or ok>". Times are steady_clock
// (CLOCK_MONOTONIC), the same clock in every process of the machine.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored::coordination {

struct ClientPhases {
  int64_t accepted_ns = 0;    // the last agent's connection accepted (channel ready)
  int64_t registered_ns = 0;  // the last agent's Connect() returned
  double clients_cpu_ms = 0;  // the children's CPU until then, all together
  double barrier_ms = 0;      // first agent's barrier RTT, mean of the rounds after the first
  double barriers_cpu_ms = 0; // the children's CPU in all their barrier rounds, all together
  int64_t exited_ns = 0;      // the last agent's Shutdown() returned
};

class ClientProcesses {
 public:
  // Starts `processes` children running `agents` agents between them.
  // `light`: lightweight agents (light_agents.h) instead of CoordinationAgents.
  // `error_polls` (light agents only): each holds its error poll open.
  static StatusOr<ClientProcesses> Spawn(const std::string& address, int agents, int processes, int barrier_rounds,
                                         bool light, bool error_polls = false);
  // The latest accept and registration over all children. Errors: a child's.
  StatusOr<ClientPhases> WaitRegistered();
  // Lets the children run their barrier rounds; then their exit barrier.
  void Go() { Tell("go"); }
  // Fills barrier_ms and barriers_cpu_ms. Errors: a child's.
  Status WaitBarriers(ClientPhases* phases);
  void Exit() { Tell("exit"); }
  // Fills exited_ns. Errors: a child's, or its exit status.
  Status WaitDone(ClientPhases* phases);

  // A child not waited for by WaitDone (an error before it, or midway
  // through Spawn) is killed and reaped: none outlives the benchmark.
  ClientProcesses() = default;
  ClientProcesses(ClientProcesses&&) = default;
  ClientProcesses& operator=(ClientProcesses&&) = default;
  ~ClientProcesses();

 private:
  struct Child {
    pid_t pid = -1;
    int to_child = -1;
    int from_child = -1;
    std::string pending;  // read, not yet a whole line
  };
  StatusOr<std::string> ReadLine(Child& child);
  void Tell(const std::string& word);
  std::vector<Child> children_;
};

// The child's main: argv = self --agent-process ADDRESS FIRST COUNT TASKS ROUNDS.
int RunAgentProcess(int argc, char** argv);

// This process's CPU time so far (CLOCK_PROCESS_CPUTIME_ID), in ms.
double ProcessCpuMs();

// The child's side of the protocol after its barrier rounds: says
// "barriers ...", waits for "exit"; false when not told to.
bool ReportBarriersAndWaitForExit(double rtt_ms, double cpu_ms, const std::string& error);

}  // namespace mirrored::coordination
