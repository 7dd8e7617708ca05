// The NCCL unique id the chief hands to every task at rendezvous.
//
//   StatusOr<std::string> id = GenerateNcclUniqueId();   // 128 bytes
//   ncclUniqueId nid; std::memcpy(nid.internal, id->data(), 128);
//   ncclCommInitRank(&comm, world, nid, rank);
//
// With MIRRORED_WITH_CUDA this is the real ncclGetUniqueId (it needs no GPU:
// it starts NCCL's bootstrap root listener in this process, which is why only
// the chief calls it). Without CUDA there is no NCCL to use the id, so it is
// 128 bytes from std::random_device — unique, but not an NCCL address.
#pragma once

#include <string>

#include "common/status.h"

namespace mirrored::coordination {

inline constexpr size_t kNcclUniqueIdBytes = 128;

// Errors: Internal when ncclGetUniqueId fails (the message has NCCL's text).
StatusOr<std::string> GenerateNcclUniqueId();

// 128 random bytes in the id's place, for a job without GPU replicas: no
// NCCL listener is opened for it.
StatusOr<std::string> RandomUniqueIdBytes();

// True when GenerateNcclUniqueId calls the real NCCL.
bool NcclUniqueIdIsReal();

}  // namespace mirrored::coordination
