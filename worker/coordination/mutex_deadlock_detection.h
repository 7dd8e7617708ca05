// Debian's Abseil is built without NDEBUG, so absl::Mutex runs its debug
// deadlock detector: every lock taken while another is held records the
// lock order in one process-wide graph, under one global lock. gRPC takes
// absl::Mutexes on every call; with a thousand connections that graph has
// thousands of nodes, and the chief's service spent most of its CPU in
// GraphCycles (perf, bench/RESULTS.md "Coordination service at scale"):
// rendezvous grew quadratically with the tasks. The detector only reports
// lock-order cycles in code that is not ours; it is off in release builds
// of Abseil anyway.
//
//   DisableMutexDeadlockDetection();   // before the first gRPC channel or server
#pragma once

namespace mirrored::coordination {

// Turns Abseil's deadlock detection off for this process (idempotent).
void DisableMutexDeadlockDetection();

}  // namespace mirrored::coordination
