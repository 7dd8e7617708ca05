// CertificateAuthority: a CA made in this process (an EC P-256 key and a
// self-signed certificate) that issues certificates for the coordination
// service's TLS: one per host, good as server and as client certificate,
// its subject alternative names the host names and IP addresses given.
// `mirrored-launch local` makes a throwaway one per job, `certs` one per
// cluster; neither writes the CA's key anywhere.
//
//   MIRRORED_ASSIGN_OR_RETURN(auto ca, CertificateAuthority::Create("my job", kCertificateValidity));
//   MIRRORED_ASSIGN_OR_RETURN(IssuedCertificate host, ca.Issue({"10.0.0.1", "node1"}, kCertificateValidity));
//   // ca.certificate_pem(), host.certificate_pem, host.key_pem: PEM text
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

typedef struct evp_pkey_st EVP_PKEY;
typedef struct x509_st X509;

namespace mirrored {

// How long certificates made here are valid: a year (a job restarted after
// that needs new ones).
inline constexpr std::chrono::hours kCertificateValidity{24 * 365};

struct IssuedCertificate {
  std::string certificate_pem;
  std::string key_pem;  // PKCS#8, unencrypted: keep it mode 0600
};

class CertificateAuthority {
 public:
  // A new CA whose certificate's common name is `name`.
  // Errors: Internal when OpenSSL fails (its error text included).
  static StatusOr<CertificateAuthority> Create(const std::string& name, std::chrono::hours validity);

  // A new key and a certificate for `hosts` (each a DNS name or an IPv4/IPv6
  // address; the first is also the common name), for server and client
  // authentication. Errors: InvalidArgument naming a host that is neither
  // (empty, spaces, commas...); Internal from OpenSSL.
  StatusOr<IssuedCertificate> Issue(const std::vector<std::string>& hosts, std::chrono::hours validity) const;

  // A certificate for `hosts` signed by its own key, from no CA: what an
  // impostor presents (tests).
  static StatusOr<IssuedCertificate> SelfSigned(const std::vector<std::string>& hosts, std::chrono::hours validity);

  const std::string& certificate_pem() const { return certificate_pem_; }

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* key) const;
  };
  struct CertificateFree {
    void operator()(X509* cert) const;
  };
  CertificateAuthority() = default;

  std::unique_ptr<EVP_PKEY, KeyFree> key_;
  std::unique_ptr<X509, CertificateFree> certificate_;
  std::string certificate_pem_;
};

// InvalidArgument unless `host` is an IPv4/IPv6 literal or a DNS name
// (letters, digits, '-', '.', '_'; at most 253 characters).
Status CheckCertificateHost(const std::string& host);

}  // namespace mirrored
