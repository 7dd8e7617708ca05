#include "worker/coordination/coordination_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/launcher_environment.h"
#include "common/logging.h"
#include "common/open_file_limit.h"
#include "worker/coordination/accept_guard.h"
#include "worker/coordination/mutex_deadlock_detection.h"
#include "worker/coordination/server_limits.h"

namespace mirrored::coordination {

CoordinationServer::CoordinationServer(coordination::CoordinationService* service,
                                       std::string job_token)
    : service_(service), handler_(service, std::move(job_token)) {}

namespace {

// An address of this host that is not usable yet is tried this often, this
// long, before the bind error is the answer.
constexpr auto kAddressUsableWait = std::chrono::seconds(5);
constexpr auto kAddressUsableRetry = std::chrono::milliseconds(100);

// errno of binding `listen_address` ("host:port", a literal, a name or
// 0.0.0.0; port 0 included) as gRPC binds it: 0 when any of its addresses
// can be bound (gRPC listens on each it can), else the first one's error.
int ProbeBind(const std::string& listen_address) {
  const size_t colon = listen_address.rfind(':');
  std::string host = listen_address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "0.0.0.0") host.clear();
  const std::string port = listen_address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int first_err = 0;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) == 0) {
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as gRPC binds
      const int err = ::bind(fd, a->ai_addr, a->ai_addrlen) != 0 ? errno : 0;
      ::close(fd);
      if (err == 0) {
        first_err = 0;
        break;
      }
      if (first_err == 0) first_err = err;
    }
  }
  if (found != nullptr) freeaddrinfo(found);
  return first_err;
}

// Why `listen_address` cannot be listened on, from ProbeBind's `err`: an
// address not of this machine, or a port this process may not bind, is the
// cluster's mistake (InvalidArgument, exit 2, not retried); a port in use may
// be freed (Unavailable, exit 1).
Status BindError(const std::string& listen_address, int err) {
  const std::string prefix = "cannot bind the coordination service to " + listen_address + ": ";
  if (err == EADDRNOTAVAIL) {
    return InvalidArgumentError(prefix + "the host is not an address of this machine. Either the chief's entry in "
                                         "the cluster is wrong (give it an address of its host, or a host name: the "
                                         "service then listens on all of the host's addresses), or this host was "
                                         "given the chief's task by mistake (check TF_CONFIG's \"task\" here)");
  }
  if (err == EACCES) {
    return InvalidArgumentError(prefix + "this process may not bind that port (below 1024?): give the chief a "
                                         "port from 1024 up");
  }
  if (err == EADDRINUSE) {
    return UnavailableError(prefix + "the port is in use (another job, or a leftover process on this host?)");
  }
  return UnavailableError(prefix + (err != 0 ? std::string(std::strerror(err))
                                             : "the port is in use (another job or a leftover process on this host?) "
                                               "or the host is not an address of this machine"));
}

}  // namespace

StatusOr<std::unique_ptr<CoordinationServer>> CoordinationServer::Start(
    const std::string& listen_address, std::string job_token,
    coordination::CoordinationService* service, const TlsCredentials& tls) {
  const size_t colon = listen_address.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen_address.size()) {
    return InvalidArgumentError("coordination service address \"" + listen_address +
                                "\" has no port (expected host:port)");
  }
  MIRRORED_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, tls.ServerCredentials());
  // mirrored-launch has said it already, on its console.
  if (job_token.empty() && !tls.requires_client_certificate() && !LauncherGeneration()) {
    MIRRORED_LOG(WARNING) << "coordination service at " << listen_address
                          << " runs without a job token: anyone who can reach it can join or "
                             "disturb the job (set MIRRORED_JOB_TOKEN)";
  }
  // An address of this host that is not usable yet (an interface still
  // coming up, IPv6 duplicate address detection) becomes so within seconds.
  const auto usable_by = std::chrono::steady_clock::now() + kAddressUsableWait;
  int probe = ProbeBind(listen_address);
  while (probe == EADDRNOTAVAIL && std::chrono::steady_clock::now() < usable_by) {
    std::this_thread::sleep_for(kAddressUsableRetry);
    probe = ProbeBind(listen_address);
  }
  // A bind that fails here fails in gRPC too: say why without gRPC's own
  // error line before ours.
  if (probe == EADDRNOTAVAIL || probe == EACCES || probe == EADDRINUSE) return BindError(listen_address, probe);
  std::unique_ptr<CoordinationServer> server(new CoordinationServer(service, std::move(job_token)));
  DisableMutexDeadlockDetection();  // its cost grows with the connections
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(listen_address, credentials, &selected_port);
  // gRPC turns SO_REUSEPORT on by default on Linux: two servers could then
  // share one port and split the job's calls between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyConnectionLimits(builder);
  RaiseOpenFileLimit();
  builder.RegisterService(&server->handler_);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || selected_port == 0) {
    if (server->server_) server->server_->Shutdown();
    return BindError(listen_address, ProbeBind(listen_address));
  }
  server->port_ = selected_port;
  GuardAccepts(selected_port);
  server->bound_address_ = listen_address.substr(0, colon + 1) + std::to_string(selected_port);
  // The address ends the line (scripts look for it there), then what is
  // served over TLS says so.
  MIRRORED_LOG(INFO) << "coordination service listening on " << server->bound_address_;
  if (tls.enabled()) {
    MIRRORED_LOG(INFO) << "the coordination service speaks " << tls.Describe();
  }
  return server;
}

CoordinationServer::~CoordinationServer() { Stop(); }

void CoordinationServer::Stop(int64_t grace_ms) {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!server_) return;
  service_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  server_->Wait();
  server_.reset();
  UnguardAccepts(port_);
}

}  // namespace mirrored::coordination
