// CoordinationServer: hosts a CoordinationService over gRPC at the chief's
// address. gRPC binds the address itself (no reserve-then-bind race), with
// SO_REUSEPORT off so that a port already in use is an error, not a silent
// second listener.
//
//   auto service = CoordinationService::Create(opts);
//   auto server = CoordinationServer::Start("0.0.0.0:0", token, service->get());
//   std::string addr = (*server)->bound_address();   // "0.0.0.0:41235"
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "worker/coordination/coordination_rpc_handler.h"
#include "worker/coordination/coordination_service.h"
#include "worker/coordination/tls_credentials.h"

namespace mirrored::coordination {

class CoordinationServer {
 public:
  // Serves `service` (not owned; must outlive the server) at
  // `listen_address` ("host:port"; port 0 picks a free port). An empty
  // `job_token` serves anyone and logs a warning, unless `tls` requires
  // client certificates. `tls` enabled: serves TLS with its certificate.
  // Errors: InvalidArgument (no ":port"; TLS without a certificate);
  // Unavailable naming the address when it cannot be bound (port in use, or
  // host not local).
  static StatusOr<std::unique_ptr<CoordinationServer>> Start(const std::string& listen_address,
                                                             std::string job_token,
                                                             coordination::CoordinationService* service,
                                                             const TlsCredentials& tls = TlsCredentials());
  ~CoordinationServer();  // Stop()

  // Stops the service (failing its pending calls, so none stays open) and
  // then the server, giving in-flight replies up to `grace_ms` to leave.
  // After a job failure use a short grace: a frozen (SIGSTOPped) peer never
  // reads its reply and would hold the whole grace period.
  // Thread-safe and idempotent.
  void Stop(int64_t grace_ms = 2000);

  int port() const { return port_; }
  // listen_address with the port actually bound.
  const std::string& bound_address() const { return bound_address_; }

 private:
  CoordinationServer(coordination::CoordinationService* service, std::string job_token);

  coordination::CoordinationService* const service_;
  CoordinationRpcHandler handler_;
  std::mutex stop_mu_;  // Stop() from the main thread and a signal's watcher
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string bound_address_;
};

}  // namespace mirrored::coordination
