// TlsFiles: where a task finds its TLS material for the coordination
// service (PEM files), as given by mirrored-worker's --tls-* flags or the
// MIRRORED_TLS_* variables. Only paths: TlsCredentials::Load reads and
// checks them. All empty: the service and its clients speak plaintext.
//
//   StrategyOptions o = StrategyOptions::FromEnvironment();   // o.tls = TlsFiles::FromEnvironment()
//   o.tls.server_name = "chief.example.com";                    // the SAN to expect of the chief
#pragma once

#include <string>

namespace mirrored::coordination {

struct TlsFiles {
  std::string ca_file{};    // CA that signed the chief's (and clients') certificates
  std::string cert_file{};  // this task's certificate: the chief serves with it, clients present it
  std::string key_file{};   // its private key
  // The name the chief's certificate must carry ("": the chief's host as
  // this task dials it).
  std::string server_name{};
  // Whether the chief's service requires every client to present a
  // certificate signed by the CA: "require" (also ""), or "none".
  std::string client_auth{};

  bool empty() const { return ca_file.empty() && cert_file.empty() && key_file.empty(); }

  // MIRRORED_TLS_CA, _CERT, _KEY, _SERVER_NAME and _CLIENT_AUTH.
  static TlsFiles FromEnvironment();
};

}  // namespace mirrored::coordination
