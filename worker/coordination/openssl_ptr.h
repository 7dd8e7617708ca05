// unique_ptr types for the OpenSSL objects the coordination code holds
// (TLS files checked in tls_credentials.cc, the probe in tls_probe.cc):
// each freed by its own OpenSSL function.
//
//   BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
//   X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>

namespace mirrored::coordination {

template <typename T, void (*Free)(T*)>
struct OpenSslFree {
  void operator()(T* p) const { Free(p); }
};
using BioPtr = std::unique_ptr<BIO, OpenSslFree<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, OpenSslFree<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<EVP_PKEY, EVP_PKEY_free>>;

}  // namespace mirrored::coordination
