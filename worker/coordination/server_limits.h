// What a connection to the coordination service may hold, token or not.
// A peer that opens a connection and never completes gRPC's handshake is
// dropped after kServerHandshakeTimeout; one with no call in flight for
// kMaxConnectionIdle is closed (a task's agent always has one: its
// heartbeats, its wait for the job's errors). Per connection, no
// bandwidth-delay pings, no channelz entry and no keepalive timer; per
// call, no deadline timer (cheap with 16,384 tasks).
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
#include <climits>

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
  // No timer per call and per connection: Debian builds gRPC without
  // NDEBUG, and each timer's start and cancel then also walks a chain of a
  // 1,009-bucket table of every pending timer of the process, a cost that
  // grows with the tasks (bench/RESULTS.md, 8,192 tasks: 16-36 % of the
  // service's CPU). Nothing here needs them: every call the service waits on
  // has the service's own deadline (barrier, key-value wait, registration)
  // or ends with the task (the error poll), a caller past its deadline
  // cancels its call itself, and a task gone silent is found by its
  // heartbeats, not by gRPC's keepalive pings (every 2 h by default).
  builder.AddChannelArgument(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, INT_MAX);
}

}  // namespace mirrored::coordination
