// What a connection to the coordination service may hold, token or not.
// A peer that opens a connection and never completes gRPC's handshake is
// dropped after kServerHandshakeTimeout; one with no call in flight for
// kMaxConnectionIdle is closed (a task's agent always has one: its
// heartbeats, its wait for the job's errors). Per connection, no
// bandwidth-delay pings and no channelz entry (cheap with 16,384 tasks).
// The chief also raises its soft file-descriptor limit to the hard one
// (open_file_limit.h), closes connections that would take the descriptors
// it keeps in reserve (accept_guard.h), and its checkpoint files wait for
// a descriptor rather than fail (posix_file_env).
//
//   grpc::ServerBuilder builder;
//   ApplyConnectionLimits(builder);
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>

namespace mirrored::coordination {

inline constexpr auto kServerHandshakeTimeout = std::chrono::seconds(10);
inline constexpr auto kMaxConnectionIdle = std::chrono::minutes(10);

inline void ApplyConnectionLimits(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(std::chrono::milliseconds(kServerHandshakeTimeout).count()));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(std::chrono::milliseconds(kMaxConnectionIdle).count()));
  // No bandwidth-delay probing: its HTTP/2 pings rode on every heartbeat of
  // every connection and tripled the service's CPU per second at 1,024
  // tasks (bench/RESULTS.md); its calls carry a few hundred KB at most. No
  // channelz registry either: nothing reads it.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
}

}  // namespace mirrored::coordination
