// NCCL picks a network interface by its own rules (the first that is up,
// often the external one) for its bootstrap listener, which the chief opens
// for the whole job, and for its socket transport. A GPU task pins NCCL to
// the interface its peers reach it on instead, the one Gloo binds for CPU
// jobs: lo for a local job, the TF_CONFIG address's for a cluster, unless
// the user set NCCL_SOCKET_IFNAME.
//
//   if (devices.gpu) PinNcclSocketInterface(config);
#pragma once

#include "common/cluster/cluster_config.h"

namespace mirrored {

inline constexpr const char* kNcclSocketInterfaceVariable = "NCCL_SOCKET_IFNAME";

// Sets NCCL_SOCKET_IFNAME in this process (before any NCCL call) when unset
// and the interface is found; says which either way.
void PinNcclSocketInterface(const ClusterConfig& config);

}  // namespace mirrored
