// TlsCredentials: a task's TLS material for the coordination service, read
// and checked once (TlsFiles -> PEM text), and the gRPC credentials made of
// it: the chief's server presents its certificate and, unless client_auth is
// "none", requires each client's, signed by the CA; clients verify the
// chief's against the CA and present theirs. Default-constructed: plaintext.
// The job token then goes only over a channel whose server was verified.
//
//   MIRRORED_ASSIGN_OR_RETURN(TlsCredentials tls, TlsCredentials::Load(options.tls));
//   auto server = CoordinationServer::Start(address, token, service, tls);
//   auto channel = CoordinationClient::MakeChannel(address, false, tls);
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/coordination/tls_files.h"

namespace mirrored::coordination {

class TlsCredentials {
 public:
  TlsCredentials() = default;  // plaintext

  // Reads and checks `files`: the CA holds certificates; the certificate and
  // key parse, match, and the certificate is signed by the CA and valid now.
  // Nothing given: plaintext. Errors: InvalidArgument naming the flag (and
  // its variable) and the file: unreadable, not PEM, over 1 MiB, a key that
  // is not the certificate's, a certificate the CA did not sign or that
  // expired, a certificate without its key (or the reverse), a certificate
  // or --tls-server-name without --tls-ca, a --tls-client-auth other than
  // require or none.
  static StatusOr<TlsCredentials> Load(const TlsFiles& files);

  bool enabled() const { return !ca_pem_.empty(); }
  bool has_certificate() const { return !cert_pem_.empty(); }
  // The chief's service refuses clients without a certificate of the CA.
  bool requires_client_certificate() const { return enabled() && require_client_certificate_; }
  // --tls-server-name ("": the host dialled).
  const std::string& server_name() const { return server_name_; }
  // PEM text of this task's certificate chain and key ("" without one).
  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }

  // The chief's. Errors: InvalidArgument when this task has no certificate
  // and key to serve with.
  StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials() const;
  // A client's (insecure ones when not enabled()).
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  // For log lines: "plaintext", "TLS", "mutual TLS".
  std::string Describe() const;

 private:
  std::string ca_pem_;
  std::string cert_pem_;
  std::string key_pem_;
  std::string server_name_;
  bool require_client_certificate_ = true;
};

}  // namespace mirrored::coordination
