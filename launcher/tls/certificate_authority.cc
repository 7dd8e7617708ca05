#include "launcher/tls/certificate_authority.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>

namespace mirrored {
namespace {

// Certificates start an hour in the past: a host whose clock is a little
// behind the one that made them accepts them at once.
constexpr std::chrono::seconds kClockSkewAllowance{3600};

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct BignumFree {
  void operator()(BIGNUM* bn) const { BN_free(bn); }
};
struct ExtensionFree {
  void operator()(X509_EXTENSION* ext) const { X509_EXTENSION_free(ext); }
};

// OpenSSL's queued errors as text, emptying the queue.
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    text += (text.empty() ? "" : "; ") + std::string(buf);
  }
  return text.empty() ? "no detail" : text;
}

Status OpenSslError(const std::string& what) { return InternalError(what + " failed (OpenSSL: " + OpenSslErrors() + ")"); }

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

EVP_PKEY* NewKey() { return EVP_EC_gen("P-256"); }

// The text of `cert` or `key` as PEM.
template <typename Write>
StatusOr<std::string> ToPem(Write write, const char* what) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return OpenSslError(std::string("writing the ") + what + " as PEM");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtensionFree> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError(std::string("adding the certificate extension ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return OkStatus();
}

constexpr size_t kMaxCommonNameBytes = 64;
// DNS caps a label (the part between dots) at 63 bytes (RFC 1035).
constexpr size_t kMaxHostLabelBytes = 63;

// A certificate for `key` named `name`, valid for `validity`, with a
// random serial; issuer and extensions are the caller's.
StatusOr<X509*> NewCertificate(EVP_PKEY* key, const std::string& name, std::chrono::hours validity) {
  // X.509 caps a common name at 64 characters (RFC 5280's ub-common-name);
  // a host name may have 253. The CN only labels the certificate: peers
  // check the names in subjectAltName, which hold them whole.
  const std::string common_name = name.substr(0, kMaxCommonNameBytes);
  X509* cert = X509_new();
  std::unique_ptr<BIGNUM, BignumFree> serial(BN_new());
  const long not_after = static_cast<long>(std::chrono::seconds(validity).count());
  X509_NAME* subject = cert != nullptr ? X509_get_subject_name(cert) : nullptr;
  if (cert == nullptr || !serial || X509_set_version(cert, 2) != 1 || BN_rand(serial.get(), 63, 0, 0) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert), -kClockSkewAllowance.count()) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert), not_after) == nullptr || X509_set_pubkey(cert, key) != 1 ||
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0) != 1) {
    X509_free(cert);
    return OpenSslError("making a certificate for " + common_name);
  }
  return cert;
}

// Fills in, signs and returns as PEM a leaf certificate of `key` for
// `hosts`, issued by `issuer` (whose key is `issuer_key`); `issuer` null:
// self-signed.
StatusOr<IssuedCertificate> SignLeaf(EVP_PKEY* key, const std::vector<std::string>& hosts, X509* issuer,
                                     EVP_PKEY* issuer_key, std::chrono::hours validity) {
  if (hosts.empty()) return InvalidArgumentError("a certificate needs at least one host name or address");
  std::string names;
  for (const std::string& host : hosts) {
    MIRRORED_RETURN_IF_ERROR(CheckCertificateHost(host));
    names += (names.empty() ? "" : ",") + std::string(IsIpAddress(host) ? "IP:" : "DNS:") + host;
  }
  MIRRORED_ASSIGN_OR_RETURN(X509 * raw, NewCertificate(key, hosts.front(), validity));
  std::unique_ptr<X509, void (*)(X509*)> cert(raw, X509_free);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) return OpenSslError("naming the issuer");
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  if (issuer != nullptr) {
    MIRRORED_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid"));
  }
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_alt_name, names));
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return OpenSslError("signing the certificate of " + names);
  IssuedCertificate issued;
  MIRRORED_ASSIGN_OR_RETURN(issued.certificate_pem,
                            ToPem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); }, "certificate"));
  MIRRORED_ASSIGN_OR_RETURN(issued.key_pem, ToPem([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  }, "key"));
  return issued;
}

}  // namespace

void CertificateAuthority::KeyFree::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
void CertificateAuthority::CertificateFree::operator()(X509* cert) const { X509_free(cert); }

Status CheckCertificateHost(const std::string& host) {
  if (IsIpAddress(host)) return OkStatus();
  bool ok = !host.empty() && host.size() <= 253 && host.front() != '.' && host.front() != '-';
  for (char c : host) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_');
  if (!ok) {
    std::string shown;
    for (char c : host) shown += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : "?";
    return InvalidArgumentError("\"" + shown + "\" is neither a host name nor an IP address (a certificate names "
                                "hosts with letters, digits, '-', '.' and '_', or an IPv4/IPv6 address)");
  }
  for (size_t start = 0; start <= host.size();) {
    const size_t dot = std::min(host.find('.', start), host.size());
    if (dot - start > kMaxHostLabelBytes) {
      return InvalidArgumentError("\"" + host + "\" has a part of " + std::to_string(dot - start) +
                                  " characters between dots (\"" + host.substr(start, dot - start) +
                                  "\"); DNS allows at most " + std::to_string(kMaxHostLabelBytes));
    }
    start = dot + 1;
  }
  return OkStatus();
}

StatusOr<CertificateAuthority> CertificateAuthority::Create(const std::string& name, std::chrono::hours validity) {
  CertificateAuthority ca;
  ca.key_.reset(NewKey());
  if (!ca.key_) return OpenSslError("making the CA's EC P-256 key");
  MIRRORED_ASSIGN_OR_RETURN(X509 * cert, NewCertificate(ca.key_.get(), name, validity));
  ca.certificate_.reset(cert);
  if (X509_set_issuer_name(cert, X509_get_subject_name(cert)) != 1) return OpenSslError("naming the CA as issuer");
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  MIRRORED_RETURN_IF_ERROR(AddExtension(cert, cert, NID_subject_key_identifier, "hash"));
  if (X509_sign(cert, ca.key_.get(), EVP_sha256()) == 0) return OpenSslError("signing the CA certificate");
  MIRRORED_ASSIGN_OR_RETURN(ca.certificate_pem_,
                            ToPem([cert](BIO* b) { return PEM_write_bio_X509(b, cert); }, "CA certificate"));
  return ca;
}

StatusOr<IssuedCertificate> CertificateAuthority::Issue(const std::vector<std::string>& hosts,
                                                        std::chrono::hours validity) const {
  std::unique_ptr<EVP_PKEY, KeyFree> key(NewKey());
  if (!key) return OpenSslError("making an EC P-256 key");
  return SignLeaf(key.get(), hosts, certificate_.get(), key_.get(), validity);
}

StatusOr<IssuedCertificate> CertificateAuthority::SelfSigned(const std::vector<std::string>& hosts,
                                                             std::chrono::hours validity) {
  std::unique_ptr<EVP_PKEY, KeyFree> key(NewKey());
  if (!key) return OpenSslError("making an EC P-256 key");
  return SignLeaf(key.get(), hosts, nullptr, key.get(), validity);
}

}  // namespace mirrored
