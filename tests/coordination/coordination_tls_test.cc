// The coordination service over TLS, in-process on a loopback port: agents
// with certificates of the job's CA register and work; an agent that trusts
// another CA, or lacks a certificate under mutual TLS, is refused with an
// error naming TLS; a fake chief (plaintext, or TLS with a self-signed
// certificate) on the chief's address never receives the job token.
#include <gtest/gtest.h>
#include <grpcpp/server_builder.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>

#include "launcher/tls/certificate_authority.h"
#include "launcher/tls/tls_file_set.h"
#include "tests/coordination/coordination_grpc_test_util.h"
#include "worker/coordination/coordination_rpc_handler.h"
#include "worker/coordination/tls_credentials.h"

namespace mirrored::coordination {
namespace {

// A refused handshake is found within a second or two (the agent checks
// each second): far less than this registration timeout.
constexpr int64_t kRegistrationTimeoutMs = 8000;
constexpr std::chrono::seconds kRefusedWithin{5};
// Calls that find their answer at once; a plaintext agent's registration
// that the fake chief refuses at once; a test server's last replies.
constexpr int64_t kCallTimeoutMs = 5000;
constexpr int64_t kShortRegistrationTimeoutMs = 2000;
constexpr int64_t kStopGraceMs = 100;
constexpr int64_t kHeartbeatIntervalMs = 100;
constexpr int64_t kHeartbeatTimeoutMs = 1000;

// What answers at the chief's address in an attack: it records each call's
// job token and refuses the call.
class FakeChief final : public rpc::CoordinationService::Service {
 public:
  grpc::Status Register(grpc::ServerContext* ctx, const rpc::RegisterRequest*, rpc::RegisterResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    const auto token = ctx->client_metadata().find(kJobTokenMetadataKey);
    if (token != ctx->client_metadata().end()) tokens_.emplace_back(token->second.data(), token->second.size());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake chief");
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<std::string> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }

 private:
  std::mutex mu_;
  int calls_ = 0;
  std::vector<std::string> tokens_;
};

class CoordinationTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "coordination_tls_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto ca = CertificateAuthority::Create("test CA", kCertificateValidity);
    auto other_ca = CertificateAuthority::Create("another CA", kCertificateValidity);
    ASSERT_TRUE(ca.ok() && other_ca.ok());
    chief_ = Write("chief", ca->certificate_pem(), ca->Issue({"127.0.0.1", "localhost"}, kCertificateValidity));
    worker_ = Write("worker", ca->certificate_pem(), ca->Issue({"worker.test"}, kCertificateValidity));
    named_chief_ = Write("named", ca->certificate_pem(), ca->Issue({"chief.test"}, kCertificateValidity));
    stranger_ = Write("stranger", other_ca->certificate_pem(), other_ca->Issue({"127.0.0.1"}, kCertificateValidity));
    impostor_ = Write("impostor", ca->certificate_pem(), CertificateAuthority::SelfSigned({"127.0.0.1"}, kCertificateValidity));
  }
  void TearDown() override {
    if (server_) server_->Stop(kStopGraceMs);
    if (fake_server_) fake_server_->Shutdown(std::chrono::system_clock::now());
    std::filesystem::remove_all(dir_);
  }

  TlsFileSet Write(const std::string& name, const std::string& ca_pem, const StatusOr<IssuedCertificate>& issued) {
    EXPECT_TRUE(issued.ok()) << issued.status();
    auto files = WriteTlsFiles(dir_ + "/" + name, ca_pem, *issued);
    EXPECT_TRUE(files.ok()) << files.status();
    return *files;
  }

  static TlsCredentials Credentials(const TlsFileSet& f, bool with_certificate = true, std::string server_name = "") {
    TlsFiles files{.ca_file = f.ca_file, .server_name = std::move(server_name)};
    if (with_certificate) {
      files.cert_file = f.cert_file;
      files.key_file = f.key_file;
    }
    auto tls = TlsCredentials::Load(files);
    EXPECT_TRUE(tls.ok()) << tls.status();
    return tls.ok() ? *tls : TlsCredentials();
  }

  void StartService(int tasks, const TlsCredentials& tls) {
    CoordinationServiceOptions o;
    o.tasks = TaskNames(tasks);
    o.registration_timeout = std::chrono::milliseconds(kRegistrationTimeoutMs);
    o.check_interval = std::chrono::milliseconds(50);
    auto service = CoordinationService::Create(o);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    service_->StartDeadlineThread();
    auto server = CoordinationServer::Start("127.0.0.1:0", kToken, service_.get(), tls);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = server_->bound_address();
  }

  // A fake chief on a free loopback port: plaintext, or TLS with `tls`'s certificate.
  void StartFakeChief(const TlsCredentials& tls) {
    grpc::ServerBuilder builder;
    int port = 0;
    auto credentials = tls.ServerCredentials();
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    builder.AddListeningPort("127.0.0.1:0", *credentials, &port);
    builder.RegisterService(&fake_);
    fake_server_ = builder.BuildAndStart();
    ASSERT_TRUE(fake_server_ && port > 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }

  CoordinationAgentOptions Agent(const std::string& task, const TlsCredentials& tls) const {
    CoordinationAgentOptions o;
    o.service_address = address_;
    o.task_name = task;
    o.device_count = 1;
    o.job_token = kToken;
    o.service_task = "chief:0";
    o.heartbeat_interval = std::chrono::milliseconds(kHeartbeatIntervalMs);
    o.heartbeat_timeout = std::chrono::milliseconds(kHeartbeatTimeoutMs);
    o.registration_timeout = std::chrono::milliseconds(kRegistrationTimeoutMs);
    o.tls = tls;
    return o;
  }

  // Connects an agent that must be refused: fast, naming TLS.
  Status ConnectRefused(const CoordinationAgentOptions& options) {
    CoordinationAgent agent(options);
    const auto start = std::chrono::steady_clock::now();
    Status s = agent.Connect();
    EXPECT_FALSE(s.ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, kRefusedWithin) << s;
    return s;
  }

  std::string dir_;
  TlsFileSet chief_, worker_, named_chief_, stranger_, impostor_;
  std::unique_ptr<CoordinationService> service_;
  std::unique_ptr<CoordinationServer> server_;
  FakeChief fake_;
  std::unique_ptr<grpc::Server> fake_server_;
  std::string address_;
};

TEST_F(CoordinationTlsTest, MutualTlsAgentsRegisterAndShareKeys) {
  StartService(2, Credentials(chief_));
  CoordinationAgent chief(Agent("chief:0", Credentials(chief_)));
  CoordinationAgent worker(Agent("worker:0", Credentials(worker_)));
  auto joined = std::async(std::launch::async, [&] { return worker.Connect(); });
  ASSERT_TRUE(chief.Connect().ok());
  ASSERT_TRUE(joined.get().ok());
  ASSERT_TRUE(chief.KeyValueSet("k", "over tls").ok());
  auto value = worker.KeyValueGet("k", kCallTimeoutMs);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "over tls");
  auto done = std::async(std::launch::async, [&] { return worker.Shutdown(); });
  EXPECT_TRUE(chief.Shutdown().ok());
  EXPECT_TRUE(done.get().ok());
}

TEST_F(CoordinationTlsTest, AgentTrustingAnotherCaIsRefusedNamingTls) {
  StartService(1, Credentials(chief_));
  const Status s = ConnectRefused(Agent("chief:0", Credentials(stranger_)));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("TLS handshake"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--tls-ca"), std::string::npos) << s;
  EXPECT_EQ(service_->task_state("chief:0"), TaskState::kUnregistered);
}

TEST_F(CoordinationTlsTest, MutualTlsRefusesAClientWithoutCertificate) {
  StartService(1, Credentials(chief_));
  const Status s = ConnectRefused(Agent("chief:0", Credentials(worker_, /*with_certificate=*/false)));
  EXPECT_NE(s.message().find("TLS"), std::string::npos) << s;
  EXPECT_NE(s.message().find("this task presents none"), std::string::npos) << s;
  EXPECT_EQ(service_->task_state("chief:0"), TaskState::kUnregistered);
}

TEST_F(CoordinationTlsTest, ServerNameOtherThanTheAddressIsVerified) {
  StartService(1, Credentials(named_chief_));
  // Dialled at 127.0.0.1, its certificate names chief.test alone.
  const Status s = ConnectRefused(Agent("chief:0", Credentials(worker_)));
  EXPECT_NE(s.message().find("TLS handshake"), std::string::npos) << s;
  CoordinationAgent agent(Agent("chief:0", Credentials(worker_, true, "chief.test")));
  const Status joined = agent.Connect();
  EXPECT_TRUE(joined.ok()) << joined;
  if (joined.ok()) {
    EXPECT_TRUE(agent.Shutdown().ok());
  }
}

TEST_F(CoordinationTlsTest, PlaintextFakeChiefNeverReceivesTheToken) {
  StartFakeChief(TlsCredentials());
  const Status s = ConnectRefused(Agent("worker:0", Credentials(worker_)));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("task worker:0 speaks TLS, but what answers at the coordination service"),
            std::string::npos) << s;
  EXPECT_EQ(fake_.calls(), 0);
  EXPECT_TRUE(fake_.tokens().empty());
}

TEST_F(CoordinationTlsTest, SelfSignedFakeChiefNeverReceivesTheToken) {
  TlsFiles impostor{.ca_file = impostor_.cert_file, .cert_file = impostor_.cert_file, .key_file = impostor_.key_file,
                    .client_auth = "none"};
  auto fake_tls = TlsCredentials::Load(impostor);
  ASSERT_TRUE(fake_tls.ok()) << fake_tls.status();
  StartFakeChief(*fake_tls);
  const Status s = ConnectRefused(Agent("worker:0", Credentials(worker_)));
  EXPECT_NE(s.message().find("TLS handshake"), std::string::npos) << s;
  EXPECT_EQ(fake_.calls(), 0);
  EXPECT_TRUE(fake_.tokens().empty());
}

// A task started without TLS settings, its chief serving TLS: refused
// within seconds, naming the flag it lacks (not a rendezvous timeout).
TEST_F(CoordinationTlsTest, PlaintextAgentToATlsChiefIsRefusedNamingTls) {
  StartService(1, Credentials(chief_));
  const Status s = ConnectRefused(Agent("chief:0", TlsCredentials()));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("has no TLS settings, but the coordination service"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--tls-ca"), std::string::npos) << s;
  EXPECT_EQ(service_->task_state("chief:0"), TaskState::kUnregistered);
}

// The task trusts both CAs, so it verifies the chief, and presents a
// certificate of the other one, which the chief refuses (mutual TLS).
TEST_F(CoordinationTlsTest, AgentWithACertificateOfAnotherCaIsRefusedNamingTls) {
  StartService(1, Credentials(chief_));
  auto text = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string bundle = dir_ + "/both-cas.pem";
  std::ofstream(bundle) << text(chief_.ca_file) << text(stranger_.ca_file);
  auto tls = TlsCredentials::Load(
      TlsFiles{.ca_file = bundle, .cert_file = stranger_.cert_file, .key_file = stranger_.key_file});
  ASSERT_TRUE(tls.ok()) << tls.status();
  const Status s = ConnectRefused(Agent("chief:0", *tls));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the chief refused this task's certificate"), std::string::npos) << s;
  EXPECT_EQ(service_->task_state("chief:0"), TaskState::kUnregistered);
}

// The fake chief does capture a token sent in plaintext: what TLS prevents.
TEST_F(CoordinationTlsTest, PlaintextAgentHandsTheFakeChiefItsToken) {
  StartFakeChief(TlsCredentials());
  CoordinationAgentOptions o = Agent("worker:0", TlsCredentials());
  o.registration_timeout = std::chrono::milliseconds(kShortRegistrationTimeoutMs);
  CoordinationAgent agent(o);
  EXPECT_FALSE(agent.Connect().ok());
  ASSERT_GE(fake_.calls(), 1);
  EXPECT_EQ(fake_.tokens().front(), kToken);
}

}  // namespace
}  // namespace mirrored::coordination
