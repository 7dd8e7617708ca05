#include "worker/coordination/coordination_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>

#include "common/launcher_environment.h"
#include "common/logging.h"

namespace mirrored::coordination {

CoordinationServer::CoordinationServer(coordination::CoordinationService* service,
                                       std::string job_token)
    : service_(service), handler_(service, std::move(job_token)) {}

StatusOr<std::unique_ptr<CoordinationServer>> CoordinationServer::Start(
    const std::string& listen_address, std::string job_token,
    coordination::CoordinationService* service) {
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen_address.size()) {
    return InvalidArgumentError("coordination service address \"" + listen_address +
                                "\" has no port (expected host:port)");
  }
  // mirrored-launch has said it already, on its console.
  if (job_token.empty() && !LauncherGeneration()) {
    MIRRORED_LOG(WARNING) << "coordination service at " << listen_address
                          << " runs without a job token: anyone who can reach it can join or "
                             "disturb the job (set MIRRORED_JOB_TOKEN)";
  }
  std::unique_ptr<CoordinationServer> server(new CoordinationServer(service, std::move(job_token)));
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(listen_address, grpc::InsecureServerCredentials(), &selected_port);
  // gRPC turns SO_REUSEPORT on by default on Linux: two servers could then
  // share one port and split the job's calls between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&server->handler_);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || selected_port == 0) {
    if (server->server_) server->server_->Shutdown();
    return UnavailableError("cannot bind the coordination service to " + listen_address +
                            ": the port is in use (another job or a leftover process on this "
                            "host?) or the host is not an address of this machine");
  }
  server->port_ = selected_port;
  server->bound_address_ = listen_address.substr(0, colon + 1) + std::to_string(selected_port);
  MIRRORED_LOG(INFO) << "coordination service listening on " << server->bound_address_;
  return server;
}

CoordinationServer::~CoordinationServer() { Stop(); }

void CoordinationServer::Stop(int64_t grace_ms) {
  if (!server_) return;
  service_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  server_->Wait();
  server_.reset();
}

}  // namespace mirrored::coordination
