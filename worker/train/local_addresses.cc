#include "worker/train/local_addresses.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

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
  std::string addresses;
  bool local = false;
  for (const addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage any{};
    std::memcpy(&any, a->ai_addr, a->ai_addrlen);  // port 0
    local = ::bind(fd, reinterpret_cast<const sockaddr*>(&any), a->ai_addrlen) == 0 || errno != EADDRNOTAVAIL;
    ::close(fd);
    char text[INET6_ADDRSTRLEN] = "?";
    const void* ip = a->ai_family == AF_INET6
                         ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr)
                         : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr);
    inet_ntop(a->ai_family, ip, text, sizeof(text));
    if (addresses.find(text) == std::string::npos) addresses += (addresses.empty() ? "" : ", ") + std::string(text);
  }
  freeaddrinfo(found);
  return local ? "" : addresses;
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
