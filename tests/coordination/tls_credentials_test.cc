// TlsCredentials::Load: the TLS files of a task are read and checked before
// anything connects, and every refusal names the flag, its variable and the
// file (mirrored-worker exits 2 with that message).
#include "worker/coordination/tls_credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <stdlib.h>

#include <filesystem>

#include "launcher/tls/certificate_authority.h"
#include "launcher/tls/tls_file_set.h"

namespace mirrored::coordination {
namespace {

class TlsCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "tls_credentials_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto ca = CertificateAuthority::Create("test CA", kCertificateValidity);
    auto other = CertificateAuthority::Create("other CA", kCertificateValidity);
    ASSERT_TRUE(ca.ok() && other.ok());
    auto mine = WriteTlsFiles(dir_ + "/mine", ca->certificate_pem(), *ca->Issue({"h1"}, kCertificateValidity));
    auto theirs = WriteTlsFiles(dir_ + "/theirs", other->certificate_pem(), *other->Issue({"h1"}, kCertificateValidity));
    ASSERT_TRUE(mine.ok() && theirs.ok());
    mine_ = *mine;
    theirs_ = *theirs;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  TlsFiles Files(const TlsFileSet& f) const {
    return TlsFiles{.ca_file = f.ca_file, .cert_file = f.cert_file, .key_file = f.key_file};
  }
  static std::string Error(const TlsFiles& files) {
    auto tls = TlsCredentials::Load(files);
    EXPECT_FALSE(tls.ok());
    EXPECT_EQ(tls.status().code(), StatusCode::kInvalidArgument) << tls.status();
    return tls.ok() ? "" : tls.status().message();
  }

  std::string dir_;
  TlsFileSet mine_, theirs_;
};

TEST_F(TlsCredentialsTest, NothingGivenIsPlaintext) {
  auto tls = TlsCredentials::Load(TlsFiles{});
  ASSERT_TRUE(tls.ok());
  EXPECT_FALSE(tls->enabled());
  EXPECT_EQ(tls->Describe(), "plaintext");
}

TEST_F(TlsCredentialsTest, MatchingFilesLoadAsMutualTls) {
  auto tls = TlsCredentials::Load(Files(mine_));
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->enabled());
  EXPECT_TRUE(tls->has_certificate());
  EXPECT_TRUE(tls->requires_client_certificate());
  EXPECT_TRUE(tls->ServerCredentials().ok());
  TlsFiles ca_only{.ca_file = mine_.ca_file, .client_auth = "none"};
  tls = TlsCredentials::Load(ca_only);
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->requires_client_certificate());
  EXPECT_EQ(tls->ServerCredentials().status().code(), StatusCode::kInvalidArgument);  // the chief needs its own
}

TEST_F(TlsCredentialsTest, MissingFileNamesTheFlagAndVariable) {
  TlsFiles files = Files(mine_);
  files.ca_file = dir_ + "/nonexistent.pem";
  const std::string message = Error(files);
  EXPECT_NE(message.find("--tls-ca (MIRRORED_TLS_CA) " + files.ca_file), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  files = Files(mine_);
  files.key_file = "/dev/zero";
  EXPECT_NE(Error(files).find("--tls-key (MIRRORED_TLS_KEY) /dev/zero: not a regular file"), std::string::npos);
  // A FIFO with no writer would block the open for ever.
  files = Files(mine_);
  files.ca_file = dir_ + "/fifo.pem";
  ASSERT_EQ(::mkfifo(files.ca_file.c_str(), 0600), 0);
  EXPECT_NE(Error(files).find("--tls-ca (MIRRORED_TLS_CA) " + files.ca_file + ": not a regular file"),
            std::string::npos);
}

TEST_F(TlsCredentialsTest, IncompleteSettingsAreRefused) {
  TlsFiles files = Files(mine_);
  files.key_file.clear();
  EXPECT_NE(Error(files).find("needs --tls-key (MIRRORED_TLS_KEY)"), std::string::npos);
  files = Files(mine_);
  files.ca_file.clear();
  EXPECT_NE(Error(files).find("TLS needs --tls-ca"), std::string::npos);
  EXPECT_NE(Error(TlsFiles{.server_name = "chief"}).find("--tls-server-name"), std::string::npos);
  files = Files(mine_);
  files.client_auth = "optional";
  EXPECT_NE(Error(files).find("--tls-client-auth (MIRRORED_TLS_CLIENT_AUTH) \"optional\""), std::string::npos);
}

TEST_F(TlsCredentialsTest, WrongContentsAreRefusedNamingTheFile) {
  TlsFiles files = Files(mine_);
  files.ca_file = mine_.key_file;  // a key where the CA should be
  EXPECT_NE(Error(files).find("holds no PEM certificate"), std::string::npos);
  files = Files(mine_);
  files.key_file = theirs_.key_file;
  EXPECT_NE(Error(files).find("is not the key of --tls-cert"), std::string::npos);
  files = Files(mine_);
  files.ca_file = theirs_.ca_file;
  const std::string message = Error(files);
  EXPECT_NE(message.find("does not verify against --tls-ca"), std::string::npos) << message;
}

}  // namespace
}  // namespace mirrored::coordination
