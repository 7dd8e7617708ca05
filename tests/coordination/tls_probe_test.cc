// ReadConnectionFailure's reading of gRPC's "why the channel fails" (with a
// fake probe: what it asks, and when it asks at all), and ProbeTls against
// a listener that is no TLS server: one that closes each connection at once
// (as the chief does in a descriptor flood), and one that never answers.
#include "worker/coordination/tls_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "launcher/tls/certificate_authority.h"
#include "launcher/tls/tls_file_set.h"

namespace mirrored::coordination {
namespace {

using Kind = HandshakeVerdict::Kind;

constexpr std::chrono::milliseconds kProbeTimeout{500};
// ProbeTls gives up at its timeout; the margin covers a loaded machine.
constexpr std::chrono::milliseconds kProbeReturnsWithin{3000};
constexpr char kSocketClosed[] = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:1: "
                                 "Socket closed";

class TlsProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "tls_probe_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto ca = CertificateAuthority::Create("probe CA", kCertificateValidity);
    ASSERT_TRUE(ca.ok()) << ca.status();
    auto issued = ca->Issue({"127.0.0.1"}, kCertificateValidity);
    ASSERT_TRUE(issued.ok()) << issued.status();
    auto files = WriteTlsFiles(dir_, ca->certificate_pem(), *issued);
    ASSERT_TRUE(files.ok()) << files.status();
    auto with_cert = TlsCredentials::Load({.ca_file = files->ca_file, .cert_file = files->cert_file,
                                           .key_file = files->key_file});
    auto ca_only = TlsCredentials::Load({.ca_file = files->ca_file});
    ASSERT_TRUE(with_cert.ok() && ca_only.ok());
    with_cert_ = *with_cert;
    ca_only_ = *ca_only;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // ReadConnectionFailure with a probe that answers `answer` and counts its calls.
  HandshakeVerdict Read(const std::string& grpc_message, const TlsCredentials& tls, TlsProbeResult answer = {}) {
    return ReadConnectionFailure(grpc_message, tls, [&] {
      ++probes_;
      return answer;
    });
  }

  std::string dir_;
  TlsCredentials plaintext_, with_cert_, ca_only_;
  int probes_ = 0;
};

TEST_F(TlsProbeTest, TlsVerdictsOfGrpcItselfNeedNoProbe) {
  const HandshakeVerdict v = Read(
      "UNAVAILABLE: ipv4:127.0.0.1:1: Handshake failed with fatal error SSL_ERROR_SSL: certificate verify failed",
      with_cert_);
  EXPECT_EQ(v.kind, Kind::kHandshakeFailed);
  EXPECT_NE(v.detail.find("certificate verify failed"), std::string::npos) << v.detail;
  EXPECT_EQ(probes_, 0);
}

TEST_F(TlsProbeTest, AWrongVersionNumberSaysThePeerSpeaksNoTls) {
  const HandshakeVerdict v = Read("Handshake failed with fatal error SSL_ERROR_SSL: wrong version number", ca_only_);
  EXPECT_EQ(v.kind, Kind::kServiceSpeaksNoTls);
  EXPECT_NE(v.detail.find("wrong version number"), std::string::npos) << v.detail;
}

TEST_F(TlsProbeTest, TroubleOnTheConnectionIsRetried) {
  EXPECT_EQ(Read("Handshake read failed (SSL_ERROR_SYSCALL)", with_cert_).kind, Kind::kNone);
  EXPECT_EQ(Read("ipv4:127.0.0.1:1: Connection refused", plaintext_).kind, Kind::kNone);
  EXPECT_EQ(Read("ipv4:127.0.0.1:1: Connection refused", with_cert_).kind, Kind::kNone);
  EXPECT_EQ(probes_, 0);
  // A closed connection that the probe finds no TLS in: a flood, a restart.
  EXPECT_EQ(Read(kSocketClosed, plaintext_).kind, Kind::kNone);
  EXPECT_EQ(Read(kSocketClosed, with_cert_).kind, Kind::kNone);
  EXPECT_EQ(probes_, 2);
}

TEST_F(TlsProbeTest, APlaintextTaskMeetingTlsIsToldSo) {
  const HandshakeVerdict v = Read(kSocketClosed, plaintext_, {.speaks_tls = true});
  EXPECT_EQ(v.kind, Kind::kServiceSpeaksTls);
  EXPECT_NE(v.detail.find("Socket closed"), std::string::npos) << v.detail;
  // A TLS task that the chief answers without refusing: not a TLS verdict.
  EXPECT_EQ(Read(kSocketClosed, with_cert_, {.speaks_tls = true}).kind, Kind::kNone);
}

TEST_F(TlsProbeTest, ARefusedCertificateIsNamed) {
  const TlsProbeResult refused{.speaks_tls = true, .refusal = "its TLS alert: tlsv1 alert unknown ca"};
  HandshakeVerdict v = Read(kSocketClosed, with_cert_, refused);
  EXPECT_EQ(v.kind, Kind::kHandshakeFailed);
  EXPECT_NE(v.detail.find("refused this task's certificate (its TLS alert: tlsv1 alert unknown ca)"),
            std::string::npos) << v.detail;
  EXPECT_NE(v.detail.find("--tls-cert is signed by a CA in the chief's --tls-ca"), std::string::npos) << v.detail;
  v = Read(kSocketClosed, ca_only_, refused);
  EXPECT_EQ(v.kind, Kind::kHandshakeFailed);
  EXPECT_NE(v.detail.find("this task presents none"), std::string::npos) << v.detail;
}

// A loopback listener that closes each connection it accepts at once, or
// (`answer` false) keeps it open without a byte.
class Listener {
 public:
  explicit Listener(bool close_at_once) : close_at_once_(close_at_once) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 4) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0 || stop_) {
          if (c >= 0) close(c);
          return;
        }
        if (close_at_once_) {
          close(c);
        } else {
          held_ = c;
        }
      }
    });
  }
  ~Listener() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
    if (held_ >= 0) close(held_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  bool close_at_once_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> held_{-1};
  std::thread thread_;
};

TEST_F(TlsProbeTest, AListenerThatClosesAtOnceSpeaksNoTls) {
  Listener closing(/*close_at_once=*/true);
  for (const TlsCredentials* tls : {&plaintext_, &with_cert_}) {
    const TlsProbeResult r = ProbeTls(closing.address(), *tls, kProbeTimeout);
    EXPECT_FALSE(r.speaks_tls);
    EXPECT_TRUE(r.refusal.empty()) << r.refusal;
  }
}

TEST_F(TlsProbeTest, AListenerThatNeverAnswersEndsAtTheTimeout) {
  Listener silent(/*close_at_once=*/false);
  const auto start = std::chrono::steady_clock::now();
  const TlsProbeResult r = ProbeTls(silent.address(), with_cert_, kProbeTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kProbeReturnsWithin);
  EXPECT_FALSE(r.speaks_tls);
  EXPECT_TRUE(r.refusal.empty()) << r.refusal;
}

TEST_F(TlsProbeTest, NoAddressToProbeFindsNothing) {
  EXPECT_FALSE(ProbeTls("", plaintext_, kProbeTimeout).speaks_tls);
  EXPECT_FALSE(ProbeTls("not an address", plaintext_, kProbeTimeout).speaks_tls);
}

}  // namespace
}  // namespace mirrored::coordination
