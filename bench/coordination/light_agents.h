// Lightweight agents for coordination_bench: in one client process, many
// tasks, each with its own channel (its own TCP connection to the service)
// but no thread of its own: their calls are gRPC's asynchronous callback
// calls, the same RPCs an agent makes (Register, Heartbeat every second,
// Barrier, Shutdown; the error poll only when asked). With real agents, three threads each,
// the clients on a 2-core machine cost more than the service they measure.
//
//   return RunLightAgentProcess(argc, argv);   // child: --light-agent-process ...
#pragma once

namespace mirrored::coordination {

// argv = self --light-agent-process ADDRESS FIRST COUNT TASKS ROUNDS POLLS,
// POLLS "polls" (each task also holds its error poll open from its
// registration on, as an agent does) or "no-polls"; the protocol with the
// parent is RunAgentProcess's (client_processes.h).
int RunLightAgentProcess(int argc, char** argv);

}  // namespace mirrored::coordination
