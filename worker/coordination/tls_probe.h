// What a connection to the chief's service met when gRPC says only
// "Socket closed": gRPC keeps TLS's own verdict (the chief's alert) to
// itself, so the agent asks again, once, with OpenSSL on a socket of its
// own. The probe sends no token and nothing secret (a certificate is
// public; its key never leaves), and reads no more than a TLS record.
//
//   TlsProbeResult r = ProbeTls("10.0.0.1:2222", tls, std::chrono::seconds(2));
//   if (r.speaks_tls && !tls.enabled()) ...  // a plaintext task, a TLS chief
//   if (!r.refusal.empty()) ...              // the chief refused this task's certificate
//
//   HandshakeVerdict v = ReadConnectionFailure(grpc_message, tls, [&] { return ProbeTls(address, tls, t); });
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "worker/coordination/tls_credentials.h"

namespace mirrored::coordination {

struct TlsProbeResult {
  // The server finished a TLS handshake, or answered one with a TLS alert.
  bool speaks_tls = false;
  // How it refused the connection, presenting `tls`'s certificate (or
  // none): "its TLS alert: tlsv1 alert unknown ca", or "it closed the
  // connection after the TLS handshake, before any answer" (gRPC's server
  // drops its alert). "" when it answered, or the probe found nothing.
  std::string refusal;
};

// Connects to `address` ("host:port", "[v6]:port") and, within `timeout`
// in all, makes a TLS handshake presenting `tls`'s certificate (if any),
// then sends HTTP/2's preface and reads the answer. The server's
// certificate is not verified: gRPC's own handshake does that. A failure
// to connect, a timeout, or a plaintext answer: speaks_tls false.
TlsProbeResult ProbeTls(const std::string& address, const TlsCredentials& tls, std::chrono::milliseconds timeout);

// How a failing connection to the chief's service reads, from gRPC's last
// connection error and (only when that says "Socket closed") the probe's.
struct HandshakeVerdict {
  enum class Kind {
    kNone,              // nothing TLS decides: the chief not up yet, a reset, a flood; retry
    kHandshakeFailed,   // TLS refused a certificate, a name, a version; `detail` says how
    kServiceSpeaksTls,  // this task has no TLS settings and the chief speaks TLS
    kServiceSpeaksNoTls,  // this task speaks TLS and what answers does not
  };
  Kind kind = Kind::kNone;
  std::string detail;
};

HandshakeVerdict ReadConnectionFailure(const std::string& grpc_message, const TlsCredentials& tls,
                                       const std::function<TlsProbeResult()>& probe);

}  // namespace mirrored::coordination
