// PeerHost: the host part of gRPC's name for a caller, and whether it is
// the IP a cluster lists for a task. The coordination service keys what it
// knows of a process by its host (who holds a task, whose calls it refused
// for the job token).
//
//   PeerHost("ipv4:10.0.0.2:41234")              // "10.0.0.2"
//   PeerHost("ipv6:[::1]:41234")                 // "[::1]"
//   ListedIpMatches("::1", PeerHost(peer))       // true for a caller on ::1
#pragma once

#include <string>

namespace mirrored::coordination {

// gRPC's peer "ipv4:10.0.0.2:41234" -> "10.0.0.2", "ipv6:[::1]:41234" ->
// "[::1]"; anything else (a unix socket, "" in tests) as it is.
std::string PeerHost(std::string peer);

// Whether the cluster's host `listed` ("10.0.0.2", "::1" or "[::1]") is an
// IP address and `peer_host` (PeerHost's form) is that address. False for a
// listed name (no lookup is made) and for an empty `peer_host`.
bool ListedIpMatches(const std::string& listed, const std::string& peer_host);

}  // namespace mirrored::coordination
