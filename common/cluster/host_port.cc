#include "common/cluster/host_port.h"

#include <algorithm>
#include <cctype>

#include "common/quoted_text.h"

namespace mirrored {
namespace {

StatusOr<uint16_t> ParsePort(std::string_view digits) {
  if (digits.empty()) return InvalidArgumentError("port is empty");
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return InvalidArgumentError("port \"" + std::string(digits) + "\" is not a number");
  }
  // Digits only, so the value can only be too large; cap the digit count
  // before converting so "999999999999" cannot overflow.
  std::string_view trimmed = digits.substr(std::min(digits.find_first_not_of('0'), digits.size()));
  long value = trimmed.size() > 6 ? 1000000 : (trimmed.empty() ? 0 : std::stol(std::string(trimmed)));
  if (value < 1 || value > 65535) {
    return InvalidArgumentError("port " + std::string(digits) + " is out of range 1-65535");
  }
  return static_cast<uint16_t>(value);
}

bool IsNameCharacter(char c) {
  // RFC 1123 letters, digits and hyphens; '_' too, as resolvers and
  // container runtimes accept it in names they hand out.
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool IsIpv6Character(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

// An IPv6 literal, optionally with a zone ("fe80::1%eth0").
Status ValidateIpv6(std::string_view host) {
  const size_t percent = host.find('%');
  const std::string_view address = host.substr(0, percent);
  const std::string_view zone = percent == std::string_view::npos ? "" : host.substr(percent + 1);
  const bool address_ok = std::all_of(address.begin(), address.end(), IsIpv6Character);
  const bool zone_ok = std::all_of(zone.begin(), zone.end(), [](char c) { return IsNameCharacter(c) || c == '.'; });
  if (!address_ok || !zone_ok || (percent != std::string_view::npos && zone.empty())) {
    return InvalidArgumentError("host " + QuotedText(host) +
                                " is not an IPv6 address (hex digits and \":\", with an optional %zone)");
  }
  return OkStatus();
}

}  // namespace

Status HostPort::ValidateHost(std::string_view host) {
  if (host.empty()) return InvalidArgumentError("host is empty");
  if (host.find(':') != std::string_view::npos) return ValidateIpv6(host);
  if (host.size() > kMaxHostNameLength) {
    return InvalidArgumentError("host name of " + std::to_string(host.size()) + " characters is longer than " +
                                std::to_string(kMaxHostNameLength) + " (RFC 1123)");
  }
  std::string_view rest = host.back() == '.' ? host.substr(0, host.size() - 1) : host;  // "h1.example."
  while (true) {
    const size_t dot = rest.find('.');
    const std::string_view label = rest.substr(0, dot);
    if (!std::all_of(label.begin(), label.end(), IsNameCharacter)) {
      return InvalidArgumentError("host " + QuotedText(host) +
                                  " contains an invalid character (a host name has letters, digits, \"-\" and "
                                  "\".\"; an IPv6 address goes in brackets)");
    }
    if (label.empty() || label.size() > kMaxHostLabelLength || label.front() == '-' || label.back() == '-') {
      return InvalidArgumentError("host " + QuotedText(host) + " has an invalid label " + QuotedText(label) +
                                  ": each dot-separated part is 1-63 characters and does not begin or end "
                                  "with \"-\"");
    }
    if (dot == std::string_view::npos) return OkStatus();
    rest = rest.substr(dot + 1);
  }
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string HostPort::CanonicalKey() const {
  std::string key = host;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return key + "|" + std::to_string(port);
}

StatusOr<HostPort> HostPort::Parse(std::string_view text) {
  HostPort out;
  std::string_view port_text;
  if (const size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    return InvalidArgumentError("has a URL scheme (\"" + std::string(text.substr(0, scheme + 3)) +
                                "\"): expected host:port, e.g. \"h1:2222\"");
  }
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgumentError("IPv6 host has no closing \"]\"");
    }
    out.host = std::string(text.substr(1, close - 1));
    if (out.host.empty()) return InvalidArgumentError("host is empty");
    if (out.host.find(':') == std::string::npos) {
      // Brackets are for IPv6 literals (RFC 3986); a name or IPv4 in them is
      // a typo, or a template left half filled.
      return InvalidArgumentError(QuotedText("[" + out.host + "]") +
                                  ": brackets are only for an IPv6 address, e.g. \"[::1]:2222\"");
    }
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      return InvalidArgumentError("has no port (expected host:port, e.g. \"[::1]:2222\")");
    }
    port_text = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgumentError("has no port (expected host:port, e.g. \"h1:2222\")");
    }
    if (text.find(':') != colon) {
      return InvalidArgumentError("an IPv6 host must be in brackets, e.g. \"[::1]:2222\"");
    }
    out.host = std::string(text.substr(0, colon));
    if (out.host.empty()) return InvalidArgumentError("host is empty");
    port_text = text.substr(colon + 1);
  }
  MIRRORED_RETURN_IF_ERROR(ValidateHost(out.host));
  MIRRORED_ASSIGN_OR_RETURN(out.port, ParsePort(port_text));
  return out;
}

}  // namespace mirrored
