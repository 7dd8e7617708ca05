#include "worker/strategy/local_addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace mirrored {

std::string ListenAddress(const HostPort& address) {
  const std::string& h = address.host;
  bool literal = h == "localhost" || h.find(':') != std::string::npos ||
                 h.find_first_not_of("0123456789.") == std::string::npos;
  if (literal) return address.ToString();
  return "0.0.0.0:" + std::to_string(address.port);
}

std::string ResolveError(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  return rc == 0 ? "" : std::string("getaddrinfo: ") + gai_strerror(rc);
}

std::string NonLocalAddresses(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return "";
  std::vector<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = "";
    const void* ip = a->ai_family == AF_INET6
                         ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr)
                         : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr);
    if (inet_ntop(a->ai_family, ip, text, sizeof(text)) != nullptr) addresses.push_back(text);
  }
  freeaddrinfo(found);
  return NonLocalAddresses(addresses);
}

std::string NonLocalAddresses(const std::vector<std::string>& addresses) {
  std::vector<std::string> distinct;
  for (const std::string& address : addresses) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    addrinfo* found = nullptr;
    if (getaddrinfo(address.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) continue;
    const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
    if (fd < 0) {  // a family this host does not run: not said either way
      freeaddrinfo(found);
      continue;
    }
    // Bound at port 0: only an address that is not this host's refuses it.
    const bool local = ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 || errno != EADDRNOTAVAIL;
    ::close(fd);
    freeaddrinfo(found);
    if (local) return "";
    if (std::find(distinct.begin(), distinct.end(), address) == distinct.end()) distinct.push_back(address);
  }
  std::string text;
  for (const std::string& address : distinct) text += (text.empty() ? "" : ", ") + address;
  return text;
}

std::string GlooInterfaceAddress(const std::optional<HostPort>& mine, const HostPort& peer) {
  if (mine) {
    in6_addr v6{};
    in_addr v4{};
    if (inet_pton(AF_INET, mine->host.c_str(), &v4) == 1 || inet_pton(AF_INET6, mine->host.c_str(), &v6) == 1) {
      return mine->host;
    }
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string result = mine ? mine->host : "127.0.0.1";
  if (getaddrinfo(peer.host.c_str(), std::to_string(peer.port).c_str(), &hints, &found) != 0) return result;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {0};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* raw = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) result = text;
      close(fd);
      break;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return result;
}

}  // namespace mirrored

namespace mirrored {

std::string InterfaceNameOf(const std::string& address) {
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, address.c_str(), &v4) == 1;
  if (!is_v4 && inet_pton(AF_INET6, address.c_str(), &v6) != 1) return "";
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string name;
  for (ifaddrs* i = all; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (is_v4 && i->ifa_addr->sa_family == AF_INET) {
      if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == v4.s_addr) name = i->ifa_name;
    } else if (!is_v4 && i->ifa_addr->sa_family == AF_INET6) {
      const in6_addr& a = reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr;
      if (std::equal(a.s6_addr, a.s6_addr + 16, v6.s6_addr)) name = i->ifa_name;
    }
  }
  freeifaddrs(all);
  // 127.0.0.2 and the like answer on lo without being listed on it.
  if (name.empty() && is_v4 && (ntohl(v4.s_addr) >> 24) == 127) name = "lo";
  return name;
}

}  // namespace mirrored
