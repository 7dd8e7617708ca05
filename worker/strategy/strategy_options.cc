#include "worker/strategy/strategy_options.h"

#include <cctype>
#include <cstdlib>

#include "common/launcher_environment.h"
#include "common/logging.h"

namespace mirrored {

StrategyOptions StrategyOptions::FromEnvironment() {
  StrategyOptions o;
  if (const char* token = std::getenv(kJobTokenVariable)) o.job_token = token;
  o.tls = coordination::TlsFiles::FromEnvironment();
  if (const char* check = std::getenv(kCheckCollectivesVariable)) {
    std::string v(check);
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    o.check_collectives = v == "1" || v == "true" || v == "yes" || v == "on";
    if (!o.check_collectives && !v.empty() && v != "0" && v != "false" && v != "no" && v != "off") {
      MIRRORED_LOG(WARNING) << kCheckCollectivesVariable << "=" << check
                            << " is neither on (1, true, yes, on) nor off (0, false, no, off): left off";
    }
  }
  if (const char* transport = std::getenv(kHostTransportVariable); transport != nullptr && *transport != '\0') {
    const std::string v(transport);
    if (v == "shm") {
      o.host_transport = HostTransport::kSharedMemory;
    } else if (v == "gloo") {
      o.host_transport = HostTransport::kGloo;
    } else if (v != "auto") {
      MIRRORED_LOG(WARNING) << kHostTransportVariable << "=" << v << " is none of auto, shm, gloo: auto";
    }
  }
  o.restarted = LauncherGeneration().value_or(0) > 0;
  return o;
}

}  // namespace mirrored
