#include "worker/train/replica_fingerprint.h"

#include <cstdint>
#include <cstring>

namespace mirrored {

float WeightsFingerprint(const std::vector<float>& w) {
  uint64_t h = 1469598103934665603ull;
  for (float f : w) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    h = (h ^ bits) * 1099511628211ull;
  }
  return static_cast<float>(h & 0xffffff);
}

StatusOr<bool> ReplicasIdentical(const std::vector<float>& params, Communicator& comm) {
  const float fp = WeightsFingerprint(params);
  std::vector<float> hi = {fp}, lo = {-fp};
  MIRRORED_RETURN_IF_ERROR(comm.AllReduceHost(hi.data(), 1, ReduceOp::kMax));
  MIRRORED_RETURN_IF_ERROR(comm.AllReduceHost(lo.data(), 1, ReduceOp::kMax));
  return hi[0] == -lo[0];
}

}  // namespace mirrored
