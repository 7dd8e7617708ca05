// Keeps the coordination service accepting under a connection flood, with
// file descriptors left over for the chief's own files.
//
// gRPC 1.51 (Debian 12's) has no cap on incoming connections, and its
// listener stops for good on the first accept4 that fails with EMFILE
// ("Failed accept4: Too many open files" in the chief's log): after a flood
// of idle connections (probe D8) the chief's service never accepted a
// connection again, so a task restarted in place could not rejoin. The
// guard is this process's accept4 (defined in accept_guard.cc, it comes
// before libc's for libgrpc) and, for a guarded listening port only:
//   - closes a new connection at once when its descriptor falls in the
//     reserve: the top DescriptorReserve(limit) numbers below the soft
//     RLIMIT_NOFILE. Descriptors are handed out lowest first, so one that
//     high means every lower one is taken; the chief's checkpoint, log and
//     data files then still find one.
//   - turns EMFILE and ENFILE into EAGAIN, which gRPC answers by waiting
//     for the next connection instead of closing its listener.
// Any other accept4 (Gloo's listener, a user's own sockets) passes through
// untouched. Newer gRPC (1.53+) retries after EMFILE itself and has
// GRPC_ARG_MAX_ALLOWED_INCOMING_CONNECTIONS.
//
//   GuardAccepts(server_port);        // once the service listens on it
//   ...
//   UnguardAccepts(server_port);      // before the server is shut down
//   uint64_t n = AcceptsRefused();    // connections closed so far
#pragma once

#include <cstdint>

namespace mirrored::coordination {

// Descriptors kept free of guarded connections under a soft limit of
// `limit`: a sixteenth of it, at least kMinDescriptorReserve.
inline constexpr uint64_t kMinDescriptorReserve = 64;
uint64_t DescriptorReserve(uint64_t limit);

// Starts and stops guarding the listening socket bound to `port` (any
// address). Several ports may be guarded at once (up to kMaxGuardedPorts;
// beyond that a port is left unguarded, with a warning).
inline constexpr int kMaxGuardedPorts = 16;
void GuardAccepts(int port);
void UnguardAccepts(int port);

// Connections to guarded ports closed for the reserve, and accepts that
// failed for want of a descriptor, in this process.
uint64_t AcceptsRefused();

}  // namespace mirrored::coordination
