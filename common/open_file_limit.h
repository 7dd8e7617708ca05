// A chief serves every task of the job and may be reached by strangers on
// its coordination port; each connection takes a file descriptor. With the
// common soft limit of 1024 a flood of idle connections left none for the
// chief's next checkpoint (probe D8), while the hard limit is often far
// higher. RaiseOpenFileLimit lifts the soft limit to the hard one.
//
//   const uint64_t limit = RaiseOpenFileLimit();   // e.g. 1048576
#pragma once

#include <cstdint>

namespace mirrored {

// Sets the soft RLIMIT_NOFILE to the hard limit (capped at kOpenFileLimitCap)
// and returns the soft limit in force afterwards. Never lowers it.
uint64_t RaiseOpenFileLimit();

// select() and some libraries misbehave on descriptors above this; a hard
// limit of "unlimited" is taken as this.
inline constexpr uint64_t kOpenFileLimitCap = uint64_t{1} << 20;

}  // namespace mirrored
