// HostPort is one task address from TF_CONFIG or Slurm: "host:port", or
// "[v6addr]:port" for an IPv6 literal. Parsing checks what a connect() would
// otherwise fail on much later: an empty host, a missing or non-numeric port,
// a port outside 1-65535, an unbracketed IPv6 literal, and a host that is
// neither an RFC 1123 name (labels of letters, digits, '-', '_'; at most 253
// characters) nor an IPv4 or IPv6 address, so no control byte or stray
// character reaches a resolver or a terminal.
//
//   StatusOr<HostPort> a = HostPort::Parse("[::1]:2222");
//   a->host == "::1"; a->port == 2222; a->ToString() == "[::1]:2222";
//   HostPort::Parse("h1:0").status().message();   // "port 0 is out of range 1-65535"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mirrored {

struct HostPort {
  std::string host;  // without brackets, even for IPv6
  uint16_t port = 0;

  // "host:port", with brackets around an IPv6 host.
  std::string ToString() const;

  // Key under which two addresses count as the same endpoint: the host
  // compared case-insensitively, the port numerically.
  std::string CanonicalKey() const;

  // Errors: InvalidArgument whose message is only the reason ("host is
  // empty"); the caller prefixes the field and the value.
  static StatusOr<HostPort> Parse(std::string_view text);

  // The host rules above, for hosts that come from elsewhere (Slurm's node
  // list, a Kubernetes service name). Same error style as Parse.
  static Status ValidateHost(std::string_view host);

  static constexpr size_t kMaxHostNameLength = 253;
  static constexpr size_t kMaxHostLabelLength = 63;

  friend bool operator==(const HostPort&, const HostPort&) = default;
};

}  // namespace mirrored
