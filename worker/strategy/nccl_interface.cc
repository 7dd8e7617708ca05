#include "worker/strategy/nccl_interface.h"

#include <cstdlib>

#include "common/logging.h"
#include "worker/strategy/local_addresses.h"

namespace mirrored {

void PinNcclSocketInterface(const ClusterConfig& config) {
  if (const char* user = std::getenv(kNcclSocketInterfaceVariable); user != nullptr && *user != '\0') {
    MIRRORED_LOG(INFO) << "NCCL sockets on " << user << " (" << kNcclSocketInterfaceVariable << ", as set)";
    return;
  }
  std::string address = "127.0.0.1";  // a single local task: its NCCL stays on this host
  const std::vector<TaskId> training = config.cluster.TrainingTasks();
  if (!config.is_single_local_task && training.size() > 1) {
    // A peer to route toward: the chief, or for the chief the next task.
    const TaskId peer = config.task == training[0] ? training[1] : training[0];
    address = GlooInterfaceAddress(config.cluster.AddressOf(config.task), *config.cluster.AddressOf(peer));
  }
  const std::string name = InterfaceNameOf(address);
  if (name.empty()) {
    MIRRORED_LOG(WARNING) << "no network interface of this host holds " << address << ": NCCL picks its own (set "
                          << kNcclSocketInterfaceVariable << " to choose)";
    return;
  }
  setenv(kNcclSocketInterfaceVariable, name.c_str(), /*overwrite=*/0);
  MIRRORED_LOG(INFO) << "NCCL sockets on " << name << " (" << address << "; " << kNcclSocketInterfaceVariable
                     << " to choose another)";
}

}  // namespace mirrored
