// Where this task listens and binds, and whether a cluster address is this
// host's: what MirroredStrategy::Create decides from TF_CONFIG's addresses
// before the chief starts its coordination service and before Gloo binds.
//
//   ListenAddress(HostPort{"h1", 2222});              // "0.0.0.0:2222" (a name may resolve elsewhere)
//   ResolveError("no-such-host");                      // "getaddrinfo: Name or service not known"
//   GlooInterfaceAddress(mine, chief_address);         // "10.0.0.2": the address peers reach
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster/host_port.h"

namespace mirrored {

// Where the chief's service listens: the exact address for an IP literal or
// localhost, every interface for a host name (it may resolve elsewhere).
std::string ListenAddress(const HostPort& address);

// Empty when `host` resolves (or is an IP literal), else getaddrinfo's reason.
std::string ResolveError(const std::string& host);

// The addresses `host` resolves to, when it resolves and none of them is
// this host's (none can be bound); "" otherwise.
std::string NonLocalAddresses(const std::string& host);
// The same for addresses already resolved (IP literals, in resolution
// order): "10.0.0.12, 10.0.0.1", each once; "" when any is this host's.
std::string NonLocalAddresses(const std::vector<std::string>& addresses);

// The address this host's peers reach it on, for Gloo to bind: the task's
// own TF_CONFIG host when it is an IP literal; otherwise the local address
// the kernel routes toward `peer` (a UDP connect sends nothing). A host name
// may resolve locally to a loopback alias (Debian maps its own name to
// 127.0.1.1) that no other host can reach.
std::string GlooInterfaceAddress(const std::optional<HostPort>& mine, const HostPort& peer);

// The name of this host's network interface that holds `address` (an IP
// literal, as GlooInterfaceAddress returns): "lo" for 127.0.0.1, "eth0"...;
// "" when none does. NCCL's sockets are pinned to it (NCCL_SOCKET_IFNAME),
// so its bootstrap listener does not open on whatever interface NCCL picks.
std::string InterfaceNameOf(const std::string& address);

}  // namespace mirrored
