#include "worker/coordination/tls_files.h"

#include <cstdlib>

#include "common/launcher_environment.h"

namespace mirrored::coordination {
namespace {

std::string Variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

TlsFiles TlsFiles::FromEnvironment() {
  return TlsFiles{.ca_file = Variable(kTlsCaVariable),
                  .cert_file = Variable(kTlsCertVariable),
                  .key_file = Variable(kTlsKeyVariable),
                  .server_name = Variable(kTlsServerNameVariable),
                  .client_auth = Variable(kTlsClientAuthVariable)};
}

}  // namespace mirrored::coordination
