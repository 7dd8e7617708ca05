#include "worker/coordination/nccl_unique_id.h"

#include <random>

#include "mirrored/config.h"

#if MIRRORED_WITH_CUDA
#include <nccl.h>
#endif

namespace mirrored::coordination {

StatusOr<std::string> RandomUniqueIdBytes() {
  std::random_device rd;
  std::string id(kNcclUniqueIdBytes, '\0');
  for (size_t i = 0; i < kNcclUniqueIdBytes; i += 4) {
    const unsigned int r = rd();
    for (size_t b = 0; b < 4 && i + b < kNcclUniqueIdBytes; ++b) id[i + b] = static_cast<char>(r >> (8 * b));
  }
  return id;
}

#if MIRRORED_WITH_CUDA
static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes, "ncclUniqueId size changed");

StatusOr<std::string> GenerateNcclUniqueId() {
  ncclUniqueId id;
  const ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    return InternalError(std::string("ncclGetUniqueId(&id) failed: ") + ncclGetErrorString(rc) +
                         " (check NCCL_SOCKET_IFNAME and that a network interface is up)");
  }
  return std::string(id.internal, kNcclUniqueIdBytes);
}

bool NcclUniqueIdIsReal() { return true; }
#else
StatusOr<std::string> GenerateNcclUniqueId() { return RandomUniqueIdBytes(); }

bool NcclUniqueIdIsReal() { return false; }
#endif

}  // namespace mirrored::coordination
