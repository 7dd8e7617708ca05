#include "worker/coordination/peer_host.h"

#include <arpa/inet.h>

namespace mirrored::coordination {
namespace {

// "[::1]" -> "::1"; anything else as it is.
std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace

std::string PeerHost(std::string peer) {
  if (peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) return peer;
  peer.erase(0, 5);
  const size_t port = peer.rfind(':');
  if (port != std::string::npos && port > 0 && (peer.front() != '[' || peer[port - 1] == ']')) peer.resize(port);
  return peer;
}

bool ListedIpMatches(const std::string& listed, const std::string& peer_host) {
  const std::string ip = Unbracketed(listed);
  return !peer_host.empty() && IsIpLiteral(ip) && ip == Unbracketed(peer_host);
}

}  // namespace mirrored::coordination
