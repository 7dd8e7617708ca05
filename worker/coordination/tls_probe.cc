#include "worker/coordination/tls_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <memory>
#include <string_view>

#include "common/cluster/host_port.h"
#include "worker/coordination/openssl_ptr.h"

namespace mirrored::coordination {
namespace {

using Clock = std::chrono::steady_clock;

using CtxPtr = std::unique_ptr<SSL_CTX, OpenSslFree<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OpenSslFree<SSL, SSL_free>>;

// HTTP/2's client preface and an empty SETTINGS frame: what gRPC's server
// waits for before it answers (with its own SETTINGS).
constexpr std::string_view kHttp2Preface{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0", 33};
constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
constexpr char kClosedAfterHandshake[] = "it closed the connection after the TLS handshake, before any answer";

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::chrono::milliseconds Left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// A connected, blocking socket whose reads and writes give up at
// `deadline`; -1 when no address of `hp` takes the connection in time.
int ConnectBefore(const HostPort& hp, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &found) != 0) return -1;
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0 && Clock::now() < deadline; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    bool ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS) {
      pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = poll(&p, 1, static_cast<int>(Left(deadline).count())) == 1 &&
           getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    if (ok) {
      connected = fd;
    } else {
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (connected < 0) return -1;
  fcntl(connected, F_SETFL, fcntl(connected, F_GETFL) & ~O_NONBLOCK);
  const auto left = Left(deadline);
  timeval tv{.tv_sec = left.count() / 1000, .tv_usec = (left.count() % 1000) * 1000};
  setsockopt(connected, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(connected, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return connected;
}

// Presents `tls`'s certificate chain and key; false when they do not load
// (they did in TlsCredentials::Load: only memory runs short here).
bool UseCertificate(SSL_CTX* ctx, const TlsCredentials& tls) {
  BioPtr certs(BIO_new_mem_buf(tls.cert_pem().data(), static_cast<int>(tls.cert_pem().size())));
  X509Ptr leaf(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));
  if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1) return false;
  while (X509* extra = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)) {
    SSL_CTX_add0_chain_cert(ctx, extra);  // owned by ctx from here
  }
  BioPtr key_bio(BIO_new_mem_buf(tls.key_pem().data(), static_cast<int>(tls.key_pem().size())));
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  return key && SSL_CTX_use_PrivateKey(ctx, key.get()) == 1;
}

// The alert the peer sent, as OpenSSL names it ("tlsv1 alert unknown ca"),
// from this thread's error queue; "" when the failure was no alert.
std::string ReceivedAlert() {
  std::string alert;
  while (const unsigned long e = ERR_get_error()) {

    if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) > SSL_AD_REASON_OFFSET) {
      const char* text = ERR_reason_error_string(e);
      alert = "its TLS alert: ";
      alert += text != nullptr ? text : "alert " + std::to_string(ERR_GET_REASON(e) - SSL_AD_REASON_OFFSET);
    }
  }
  return alert;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

TlsProbeResult Handshake(int fd, const std::string& sni, const TlsCredentials& tls) {
  TlsProbeResult result;
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return result;
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpnH2, sizeof(kAlpnH2));
  if (tls.has_certificate() && !UseCertificate(ctx.get(), tls)) return result;
  SslPtr ssl(SSL_new(ctx.get()));
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return result;
  if (!sni.empty() && !IsIpLiteral(sni)) SSL_set_tlsext_host_name(ssl.get(), sni.c_str());
  if (SSL_connect(ssl.get()) != 1) {
    // Refused within the handshake (TLS 1.2 checks a client's certificate
    // there): a TLS server all the same.
    result.refusal = ReceivedAlert();
    result.speaks_tls = !result.refusal.empty();
    return result;
  }
  result.speaks_tls = true;
  // TLS 1.3: the server checks the client's certificate after the client's
  // handshake is done, and says no in place of its answer: an alert, or
  // (gRPC's server, which drops its alert) the connection closed.
  char answer[64];
  int n = SSL_write(ssl.get(), kHttp2Preface.data(), static_cast<int>(kHttp2Preface.size()));
  if (n > 0) n = SSL_read(ssl.get(), answer, sizeof(answer));
  if (n > 0) return result;  // answered: accepted
  const int error = SSL_get_error(ssl.get(), n);
  const bool eof = error == SSL_ERROR_ZERO_RETURN ||
                   (error == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
                   (error == SSL_ERROR_SYSCALL && (errno == ECONNRESET || errno == EPIPE));
  result.refusal = ReceivedAlert();
  if (result.refusal.empty() && eof) result.refusal = kClosedAfterHandshake;
  return result;
}

// Writes to a socket the peer closed raise SIGPIPE in the writing thread:
// held back for the probe, and taken if one came (and was not pending before).
class SigpipeHeld {
 public:
  SigpipeHeld() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeHeld() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

TlsProbeResult ProbeTls(const std::string& address, const TlsCredentials& tls, std::chrono::milliseconds timeout) {
  const StatusOr<HostPort> hp = HostPort::Parse(address);
  if (!hp.ok()) return {};
  SigpipeHeld held;
  const Socket socket(ConnectBefore(*hp, Clock::now() + timeout));
  if (socket.fd() < 0) return {};
  ERR_clear_error();
  TlsProbeResult result = Handshake(socket.fd(), tls.server_name().empty() ? hp->host : tls.server_name(), tls);
  ERR_clear_error();
  return result;
}

HandshakeVerdict ReadConnectionFailure(const std::string& grpc_message, const TlsCredentials& tls,
                                       const std::function<TlsProbeResult()>& probe) {
  const std::string lower = Lower(grpc_message);
  // A verdict of TLS itself (a certificate, a name, a protocol version)
  // comes again at every try. Trouble on the connection during a handshake
  // ("Handshake read failed", SSL_ERROR_SYSCALL: the chief's handshake
  // timeout on a loaded machine, a reset) does not: registration retries.
  if (tls.enabled() && (lower.find("ssl_error_ssl") != std::string::npos ||
                        lower.find("certificate") != std::string::npos)) {
    // What answers is no TLS server: its first bytes are no TLS record.
    const bool plaintext = lower.find("wrong version number") != std::string::npos ||
                           lower.find("packet length too long") != std::string::npos;
    return {plaintext ? HandshakeVerdict::Kind::kServiceSpeaksNoTls : HandshakeVerdict::Kind::kHandshakeFailed,
            grpc_message};
  }
  // The chief closing a connection is all gRPC says when this task speaks
  // no TLS to a TLS chief, and when the chief refuses this task's
  // certificate after a TLS 1.3 handshake: the probe tells which, or that
  // it was neither (a flood, a restart).
  if (lower.find("socket closed") == std::string::npos) return {};
  const TlsProbeResult found = probe();
  if (!tls.enabled()) {
    if (!found.speaks_tls) return {};
    return {HandshakeVerdict::Kind::kServiceSpeaksTls, grpc_message};
  }
  if (found.refusal.empty()) return {};
  const std::string detail =
      tls.has_certificate()
          ? grpc_message + "; the chief refused this task's certificate (" + found.refusal +
                "): check that --tls-cert is signed by a CA in the chief's --tls-ca, and valid by the chief's clock"
          : grpc_message + "; the chief refused this task (" + found.refusal +
                "): it requires a client certificate (mutual TLS), and this task presents none";
  return {HandshakeVerdict::Kind::kHandshakeFailed, detail};
}

}  // namespace mirrored::coordination
