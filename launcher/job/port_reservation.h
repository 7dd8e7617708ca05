// A loopback port held for a task of a local job, without the
// reserve-then-release race that makes torchrun jobs clash.
//
//   auto port = PortReservation::Reserve();      // 127.0.0.1:<ephemeral>
//   std::string addr = port->address();          // "127.0.0.1:41757"
//   // start the chief: it binds the same port and listens; keep `port` alive
//
// How: the socket is bound with SO_REUSEADDR and never listens. The kernel
// never hands a bound port out as an ephemeral one, so no other launcher
// (or anything binding port 0) can get it while it is held; and because it
// does not listen, the chief's gRPC server (which also sets SO_REUSEADDR)
// can still bind and listen on it. Hold it for the job's lifetime.
#pragma once

#include <string>

#include "common/status.h"

namespace mirrored {

class PortReservation {
 public:
  // Errors: Unavailable when no port can be bound on 127.0.0.1.
  static StatusOr<PortReservation> Reserve();

  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();

  // The host every reservation is on.
  static constexpr char kHost[] = "127.0.0.1";

  int port() const { return port_; }
  std::string address() const { return std::string(kHost) + ":" + std::to_string(port_); }

 private:
  PortReservation(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace mirrored
