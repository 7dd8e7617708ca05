// TLS and authentication from the command line: `certs` writes files a task
// loads; `cluster` refuses to start off loopback without a token or client
// certificates unless --insecure; a worker given a bad TLS file exits 2
// naming the flag; `local` trains over TLS by default, its files mode 0600.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "launcher/job/port_reservation.h"
#include "launcher/process/child_process.h"
#include "tests/util/worker_process.h"
#include "worker/coordination/tls_credentials.h"

namespace mirrored {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kLauncher = std::string(MIRRORED_BIN_DIR) + "/mirrored-launch";
const std::string kWorker = std::string(MIRRORED_BIN_DIR) + "/mirrored-worker";
const std::string kFakeWorker = std::string(MIRRORED_SOURCE_DIR) + "/tests/launcher/fake_worker.sh";
// A command that only checks its inputs ends within a few seconds; a
// 20-step local job within a minute on a loaded 2-core machine.
constexpr auto kQuickCommandTimeout = 20s;
constexpr auto kLocalJobTimeout = 120s;
// A task refused over TLS says so within seconds (the agent checks each
// second); its registration timeout, far longer, must not be what ends it.
constexpr auto kTlsRefusalWithin = 15s;
constexpr char kLongRegistrationTimeout[] = "120";
// A chief stopped by SIGTERM while it waits for its tasks, or serves its error.
constexpr auto kStopTimeout = 30s;

const std::string kOffLoopback =
    R"(TF_CONFIG={"cluster":{"worker":["10.1.2.3:2222","10.1.2.4:2222"]},"task":{"type":"worker","index":0}})";

class LaunchTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "launch_tls_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Exit code (or 128 + signal), with stdout and stderr merged into *output.
  static int Run(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* output,
                 std::chrono::milliseconds timeout = kQuickCommandTimeout) {
    auto ran = ChildProcess::RunToEnd(argv, env, timeout);
    EXPECT_TRUE(ran.ok()) << ran.status();
    if (!ran.ok()) return -1;
    *output = ran->second;
    return ran->first.ShellCode();
  }

  static int Mode(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  }

  fs::path dir_;
};

TEST_F(LaunchTlsTest, CertsWritesFilesATaskLoads) {
  const fs::path certs = dir_ / "tls";
  std::string out;
  ASSERT_EQ(Run({kLauncher, "certs", certs.string(), "--hosts", "h1,node2+10.0.0.2"}, {"PATH=/usr/bin:/bin"}, &out), 0)
      << out;
  EXPECT_NE(out.find("export MIRRORED_TLS_CA=" + (certs / "h1/ca.pem").string()), std::string::npos) << out;
  EXPECT_NE(out.find("export MIRRORED_TLS_KEY=" + (certs / "node2/key.pem").string()), std::string::npos) << out;
  EXPECT_EQ(Mode(certs), 0700);
  for (const char* host : {"h1", "node2"}) {
    for (const char* file : {"ca.pem", "cert.pem", "key.pem"}) EXPECT_EQ(Mode(certs / host / file), 0600) << file;
    const fs::path d = certs / host;
    auto tls = coordination::TlsCredentials::Load(
        {.ca_file = (d / "ca.pem").string(), .cert_file = (d / "cert.pem").string(), .key_file = (d / "key.pem").string()});
    EXPECT_TRUE(tls.ok()) << tls.status();
  }
  // A second CA would invalidate the first one's files: refused.
  EXPECT_EQ(Run({kLauncher, "certs", certs.string(), "--hosts", "h3"}, {}, &out), 2) << out;
  EXPECT_NE(out.find("ca.pem exists"), std::string::npos) << out;
  EXPECT_EQ(Run({kLauncher, "certs", (dir_ / "bad").string(), "--hosts", "h1,a b"}, {}, &out), 2) << out;
  EXPECT_NE(out.find("\"a b\" is neither a host name nor an IP address"), std::string::npos) << out;
}

// A valid host name longer than a common name's 64 characters (a
// Kubernetes pod's FQDN) gets a certificate naming it whole in its SAN;
// names DNS refuses and an empty directory are refused before anything is
// written, and an existing directory keeps its mode.
TEST_F(LaunchTlsTest, CertsTakesLongNamesAndWritesNothingWhenItRefuses) {
  std::string long_name;
  for (int i = 0; i < 21; ++i) long_name += "ab.";
  long_name += "abc";  // 66 characters
  const fs::path certs = dir_ / "long";
  std::string out;
  ASSERT_EQ(Run({kLauncher, "certs", certs.string(), "--hosts", long_name}, {}, &out), 0) << out;
  const fs::path d = certs / long_name;
  auto tls = coordination::TlsCredentials::Load(
      {.ca_file = (d / "ca.pem").string(), .cert_file = (d / "cert.pem").string(), .key_file = (d / "key.pem").string()});
  EXPECT_TRUE(tls.ok()) << tls.status();

  const fs::path refused = dir_ / "refused";
  EXPECT_EQ(Run({kLauncher, "certs", refused.string(), "--hosts", "h1," + std::string(64, 'a') + ".b"}, {}, &out), 2)
      << out;
  EXPECT_NE(out.find("has a part of 64 characters between dots"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(refused));
  EXPECT_EQ(Run({kLauncher, "certs", "", "--hosts", "h1"}, {}, &out), 2) << out;
  EXPECT_NE(out.find("dir is empty"), std::string::npos) << out;

  const fs::path shared = dir_ / "shared";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms(0755));
  ASSERT_EQ(Run({kLauncher, "certs", shared.string(), "--hosts", "h1"}, {}, &out), 0) << out;
  EXPECT_EQ(Mode(shared), 0755);
  EXPECT_EQ(Mode(shared / "h1"), 0700);
}

TEST_F(LaunchTlsTest, ClusterOffLoopbackNeedsATokenOrCertificates) {
  const std::vector<std::string> dry_run = {kLauncher, "cluster", "--run-dir", (dir_ / "run").string(), "--dry-run",
                                            "--worker-binary", kFakeWorker};
  std::string out;
  EXPECT_EQ(Run(dry_run, {"PATH=/usr/bin:/bin", kOffLoopback}, &out), 2) << out;
  EXPECT_NE(out.find("nothing authenticates the tasks"), std::string::npos) << out;
  EXPECT_NE(out.find("export MIRRORED_JOB_TOKEN="), std::string::npos) << out;
  EXPECT_NE(out.find("--insecure"), std::string::npos) << out;

  std::vector<std::string> insecure = dry_run;
  insecure.push_back("--insecure");
  EXPECT_EQ(Run(insecure, {"PATH=/usr/bin:/bin", kOffLoopback}, &out), 0) << out;
  EXPECT_NE(out.find("warning: --insecure"), std::string::npos) << out;

  EXPECT_EQ(Run(dry_run, {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=t", kOffLoopback}, &out), 0) << out;
  EXPECT_NE(out.find("warning: MIRRORED_JOB_TOKEN is only 1 characters long"), std::string::npos) << out;
  // A token read from a file with its newline: gRPC would abort every task.
  EXPECT_EQ(Run(dry_run, {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=TOPSECRET0123456789\n", kOffLoopback}, &out), 2)
      << out;
  EXPECT_NE(out.find("MIRRORED_JOB_TOKEN holds a newline at byte 20 of 20"), std::string::npos) << out;
  EXPECT_EQ(out.find("TOPSECRET"), std::string::npos) << out;
  EXPECT_EQ(Run(dry_run,
                {"PATH=/usr/bin:/bin", "MIRRORED_TLS_CA=/c", "MIRRORED_TLS_CERT=/x", "MIRRORED_TLS_KEY=/k", kOffLoopback},
                &out),
            0)
      << out;
  // Without client authentication a certificate proves nothing about a task.
  EXPECT_EQ(Run(dry_run,
                {"PATH=/usr/bin:/bin", "MIRRORED_TLS_CA=/c", "MIRRORED_TLS_CERT=/x", "MIRRORED_TLS_KEY=/k",
                 "MIRRORED_TLS_CLIENT_AUTH=none", kOffLoopback},
                &out),
            2)
      << out;
  // On loopback alone only a warning.
  EXPECT_EQ(Run(dry_run,
                {"PATH=/usr/bin:/bin",
                 R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1","localhost:2"]},"task":{"type":"worker","index":0}})"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("warning: MIRRORED_JOB_TOKEN is not set"), std::string::npos) << out;
}

// gRPC aborts a process whose call carries a newline in a header: each task
// refuses the token first, at once, chief or not, and never prints it.
TEST_F(LaunchTlsTest, WorkerWithATokenGrpcCannotCarryExitsTwoAtOnce) {
  for (const char* index : {"0", "1"}) {
    std::string out;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(Run({kWorker, "--model", "mlp", "--registration-timeout", "60"},
                  {"PATH=/usr/bin:/bin", "MIRRORED_JOB_TOKEN=TOPSECRET0123456789\n",
                   std::string(R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:1","127.0.0.1:2"]},"task":{"type":"worker","index":)") +
                       index + "}}"},
                  &out),
              2)
        << out;
    EXPECT_LT(std::chrono::steady_clock::now() - start, kQuickCommandTimeout / 2) << out;
    EXPECT_NE(out.find("MIRRORED_JOB_TOKEN holds a newline at byte 20 of 20"), std::string::npos) << out;
    EXPECT_EQ(out.find("TOPSECRET"), std::string::npos) << out;
  }
}

TEST_F(LaunchTlsTest, WorkerWithABadTlsFileExitsTwoNamingTheFlag) {
  std::string out;
  const std::string missing = (dir_ / "missing.pem").string();
  EXPECT_EQ(Run({kWorker, "--tls-ca", missing, "--model", "mlp", "--max-steps", "1"}, {"PATH=/usr/bin:/bin"}, &out), 2)
      << out;
  EXPECT_NE(out.find("--tls-ca (MIRRORED_TLS_CA) " + missing + ": cannot read it"), std::string::npos) << out;
  // From the environment, as a Kubernetes Secret or a site sets it.
  EXPECT_EQ(Run({kWorker, "--model", "mlp", "--max-steps", "1"},
                {"PATH=/usr/bin:/bin", "MIRRORED_TLS_CA=" + missing, "MIRRORED_TLS_CERT=" + missing}, &out),
            2)
      << out;
  EXPECT_NE(out.find("--tls-cert (MIRRORED_TLS_CERT) " + missing + " needs --tls-key"), std::string::npos) << out;
}

// TLS on at one end only. A task without TLS settings meets a chief that
// speaks TLS; a chief whose key is not its certificate's serves that error
// in plaintext to a task over TLS. The task exits 2 within seconds saying
// which end lacks TLS, not 4 at its registration timeout.
TEST_F(LaunchTlsTest, TlsAtOneEndOnlyStopsTheTaskWithinSeconds) {
  std::string out;
  for (const char* name : {"tls", "other"}) {
    ASSERT_EQ(Run({kLauncher, "certs", (dir_ / name).string(), "--hosts", "127.0.0.1"}, {}, &out), 0) << out;
  }
  const fs::path files = dir_ / "tls" / "127.0.0.1";
  PortReservation port = std::move(PortReservation::Reserve()).value();  // the chief's, held while it binds
  auto task = [&](int index, std::vector<std::string> env) {
    env.push_back("PATH=/usr/bin:/bin");
    env.push_back("MIRRORED_JOB_TOKEN=tls-one-end-token");
    env.push_back(R"(TF_CONFIG={"cluster":{"worker":[")" + port.address() +
                  R"(","127.0.0.1:1"]},"task":{"type":"worker","index":)" + std::to_string(index) + "}}");
    auto started = testing_util::WorkerProcess::Start(
        {kWorker, "--model", "mlp", "--device", "cpu", "--registration-timeout", kLongRegistrationTimeout}, env);
    EXPECT_TRUE(started.ok()) << started.status();
    return std::move(started).value();
  };
  const std::vector<std::string> tls = {"MIRRORED_TLS_CA=" + (files / "ca.pem").string(),
                                        "MIRRORED_TLS_CERT=" + (files / "cert.pem").string(),
                                        "MIRRORED_TLS_KEY=" + (files / "key.pem").string()};
  auto refused = [&](const std::vector<std::string>& env, const std::string& says) {
    auto worker = task(1, env);
    const auto exit = worker->WaitExit(kTlsRefusalWithin);
    ASSERT_TRUE(exit.has_value()) << worker->output();
    EXPECT_EQ(exit->exit_code, 2) << worker->output();
    EXPECT_NE(worker->output().find(says), std::string::npos) << worker->output();
  };
  {
    auto chief = task(0, tls);
    ASSERT_TRUE(chief->WaitForOutput("the coordination service speaks mutual TLS", kQuickCommandTimeout))
        << chief->output();
    refused({}, "task worker:1 has no TLS settings, but the coordination service at " + port.address());
    chief->child().SignalGroup(SIGTERM);
    EXPECT_TRUE(chief->WaitExit(kStopTimeout).has_value()) << chief->output();
  }
  std::vector<std::string> wrong_key = tls;
  wrong_key.back() = "MIRRORED_TLS_KEY=" + (dir_ / "other" / "127.0.0.1" / "key.pem").string();
  auto chief = task(0, wrong_key);
  ASSERT_TRUE(chief->WaitForOutput("serving this error at", kQuickCommandTimeout)) << chief->output();
  EXPECT_NE(chief->output().find("serving its error without TLS"), std::string::npos) << chief->output();
  refused(tls, "task worker:1 speaks TLS, but what answers at the coordination service at " + port.address());
  const auto chief_exit = chief->WaitExit(kStopTimeout);
  ASSERT_TRUE(chief_exit.has_value()) << chief->output();
  EXPECT_EQ(chief_exit->exit_code, 2) << chief->output();
  EXPECT_NE(chief->output().find("--tls-key (MIRRORED_TLS_KEY)"), std::string::npos) << chief->output();
}

TEST_F(LaunchTlsTest, LocalJobTrainsOverTlsByDefault) {
  const fs::path run = dir_ / "run";
  std::string out;
  const int code = Run({kLauncher, "local", "--workers", "2", "--run-dir", run.string(), "--", "--model", "mlp",
                        "--max-steps", "20", "--registration-timeout", "60"},
                       {"PATH=/usr/bin:/bin"}, &out, kLocalJobTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("the coordination service speaks mutual TLS"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 20 steps"), std::string::npos) << out;
  EXPECT_EQ(Mode(run / "tls"), 0700);
  for (const char* file : {"ca.pem", "cert.pem", "key.pem"}) EXPECT_EQ(Mode(run / "tls" / file), 0600) << file;
}

}  // namespace
}  // namespace mirrored
