#include "worker/coordination/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/launcher_environment.h"
#include "worker/coordination/openssl_ptr.h"

namespace mirrored::coordination {
namespace {

// A PEM file of certificates or a key is a few KiB: more is the wrong file
// (and /dev/zero is never read to the end).
constexpr size_t kMaxPemFileBytes = 1 << 20;

// How a file is named in messages: the flag, its variable, and the path.
struct Named {
  const char* flag;
  const char* variable;
  std::string path;
  std::string What() const { return std::string(flag) + " (" + variable + ") " + path; }
};

using StorePtr = std::unique_ptr<X509_STORE, OpenSslFree<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, OpenSslFree<X509_STORE_CTX, X509_STORE_CTX_free>>;
struct ChainFree {  // sk_X509_free is a macro: no function to name
  void operator()(STACK_OF(X509) * chain) const { sk_X509_free(chain); }
};
using ChainPtr = std::unique_ptr<STACK_OF(X509), ChainFree>;

StatusOr<std::string> ReadPemFile(const Named& file) {
  // A FIFO would block the open with no writer: only regular files.
  struct stat st {};
  if (::stat(file.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return InvalidArgumentError(file.What() + ": not a regular file (a directory, FIFO or device), not a PEM "
                                "certificate or key");
  }
  std::ifstream in(file.path, std::ios::binary);
  if (!in) return InvalidArgumentError(file.What() + ": cannot read it: " + std::strerror(errno));
  std::string text(kMaxPemFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return InvalidArgumentError(file.What() + ": cannot read it: " + std::strerror(errno));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPemFileBytes) {
    return InvalidArgumentError(file.What() + ": larger than 1 MiB, not a PEM certificate or key");
  }
  return text;
}

// Every certificate in `pem`, in order (none when it holds none).
std::vector<X509Ptr> ParseCertificates(const std::string& pem) {
  std::vector<X509Ptr> certs;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(cert);
  ERR_clear_error();  // the end of the file reads as an error
  return certs;
}

// Never asks for a passphrase on the terminal: an encrypted key is refused.
int NoPassphrase(char*, int, int, void*) { return -1; }

// The certificate's chain (intermediates after it) leads to a CA
// certificate of `ca`, and everything in it is valid now.
Status CheckSignedByCa(const std::vector<X509Ptr>& cert_chain, const std::vector<X509Ptr>& ca, const Named& cert,
                       const Named& ca_file) {
  StorePtr store(X509_STORE_new());
  for (const X509Ptr& c : ca) X509_STORE_add_cert(store.get(), c.get());
  ChainPtr untrusted(sk_X509_new_null());
  for (size_t i = 1; i < cert_chain.size(); ++i) sk_X509_push(untrusted.get(), cert_chain[i].get());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), cert_chain.front().get(), untrusted.get()) != 1) {
    return InternalError("cannot check " + cert.What() + " against " + ca_file.What());
  }
  if (X509_verify_cert(ctx.get()) == 1) return OkStatus();
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return InvalidArgumentError(cert.What() + " does not verify against " + ca_file.What() + ": " +
                              X509_verify_cert_error_string(err) +
                              " (the other tasks would refuse it: give the certificate the CA signed, or that CA)");
}

// cert_pem holds a certificate (then intermediates) whose key is key_pem,
// signed by a CA of `ca`.
Status CheckCertificateAndKey(const std::string& cert_pem, const std::string& key_pem, const std::vector<X509Ptr>& ca,
                              const Named& cert, const Named& key, const Named& ca_file) {
  const std::vector<X509Ptr> chain = ParseCertificates(cert_pem);
  if (chain.empty()) return InvalidArgumentError(cert.What() + ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  BioPtr bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  KeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, &NoPassphrase, nullptr));
  ERR_clear_error();
  if (!pkey) {
    return InvalidArgumentError(key.What() + ": holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)");
  }
  if (X509_check_private_key(chain.front().get(), pkey.get()) != 1) {
    ERR_clear_error();
    return InvalidArgumentError(key.What() + " is not the key of " + cert.What());
  }
  return CheckSignedByCa(chain, ca, cert, ca_file);
}

}  // namespace

StatusOr<TlsCredentials> TlsCredentials::Load(const TlsFiles& files) {
  const Named ca{"--tls-ca", kTlsCaVariable, files.ca_file};
  const Named cert{"--tls-cert", kTlsCertVariable, files.cert_file};
  const Named key{"--tls-key", kTlsKeyVariable, files.key_file};
  if (!files.client_auth.empty() && files.client_auth != "require" && files.client_auth != "none") {
    return InvalidArgumentError("--tls-client-auth (" + std::string(kTlsClientAuthVariable) + ") \"" +
                                files.client_auth + "\" is neither require nor none");
  }
  TlsCredentials tls;
  tls.require_client_certificate_ = files.client_auth != "none";
  tls.server_name_ = files.server_name;
  if (files.empty()) {
    if (!files.server_name.empty()) {
      return InvalidArgumentError("--tls-server-name (" + std::string(kTlsServerNameVariable) +
                                  ") needs --tls-ca: the CA to verify the chief's certificate with");
    }
    return tls;
  }
  if (files.ca_file.empty()) {
    return InvalidArgumentError("TLS needs --tls-ca (" + std::string(kTlsCaVariable) +
                                "): the CA certificate that signed the chief's certificate, to verify it");
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    const Named& given = files.cert_file.empty() ? key : cert;
    const Named& missing = files.cert_file.empty() ? cert : key;
    return InvalidArgumentError(given.What() + " needs " + missing.flag + " (" + missing.variable + ") too");
  }
  MIRRORED_ASSIGN_OR_RETURN(tls.ca_pem_, ReadPemFile(ca));
  const std::vector<X509Ptr> ca_certs = ParseCertificates(tls.ca_pem_);
  if (ca_certs.empty()) return InvalidArgumentError(ca.What() + ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  if (!files.cert_file.empty()) {
    MIRRORED_ASSIGN_OR_RETURN(tls.cert_pem_, ReadPemFile(cert));
    MIRRORED_ASSIGN_OR_RETURN(tls.key_pem_, ReadPemFile(key));
    MIRRORED_RETURN_IF_ERROR(CheckCertificateAndKey(tls.cert_pem_, tls.key_pem_, ca_certs, cert, key, ca));
  }
  return tls;
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials::ServerCredentials() const {
  if (!enabled()) return grpc::InsecureServerCredentials();
  if (!has_certificate()) {
    return InvalidArgumentError("the chief serves the coordination service over TLS (--tls-ca is set) and needs "
                                "its certificate: give it --tls-cert and --tls-key (" +
                                std::string(kTlsCertVariable) + ", " + kTlsKeyVariable + ")");
  }
  grpc::SslServerCredentialsOptions options(require_client_certificate_
                                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = ca_pem_;
  options.pem_key_cert_pairs.push_back({key_pem_, cert_pem_});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> TlsCredentials::ChannelCredentials() const {
  if (!enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem_;
  options.pem_private_key = key_pem_;
  options.pem_cert_chain = cert_pem_;
  return grpc::SslCredentials(options);
}

std::string TlsCredentials::Describe() const {
  if (!enabled()) return "plaintext";
  return require_client_certificate_ ? "mutual TLS" : "TLS";
}

}  // namespace mirrored::coordination
