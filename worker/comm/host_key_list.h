// Every task's host key (HostLayout::FromHostKeys's input) as one value:
// the first task gathers the keys and publishes the list, so each task reads
// one value from the store instead of one per task (N² reads in all).
//
//   std::string list = JoinHostKeys({"0|boot-a", "0|boot-a", "1|boot-b"});
//   StatusOr<std::vector<std::string>> keys = SplitHostKeys(list, 3);
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace mirrored {

// "<length>:<key>" for each key, in order: any bytes may appear in a key.
std::string JoinHostKeys(const std::vector<std::string>& keys);
// Errors: InvalidArgument when `list` is not JoinHostKeys's form or holds
// another number of keys than `expected`.
StatusOr<std::vector<std::string>> SplitHostKeys(const std::string& list, int expected);

}  // namespace mirrored
