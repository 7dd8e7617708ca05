// The replicas' weights compared without moving them: each hashes its own
// parameters into a float, and two tiny all-reduces (the max of the hash
// and of its negation) tell whether every replica holds the same bits.
// --verify-replicas checks it after every step; every run at its end.
//
//   MIRRORED_ASSIGN_OR_RETURN(bool same, ReplicasIdentical(store.DownloadParams(), comm));
//   summary.weights_fingerprint = static_cast<uint32_t>(WeightsFingerprint(params));
#pragma once

#include <vector>

#include "common/status.h"
#include "worker/comm/communicator.h"

namespace mirrored {

// Order-sensitive hash (FNV-1a) of a float buffer's bits, folded into a
// float that survives an all-reduce exactly (24 bits of mantissa).
float WeightsFingerprint(const std::vector<float>& w);

// True when every replica holds the same parameters: the max and the min of
// their fingerprints agree. A collective: every replica calls it, at the
// same step. Errors: the communicator's.
StatusOr<bool> ReplicasIdentical(const std::vector<float>& params, Communicator& comm);

}  // namespace mirrored
