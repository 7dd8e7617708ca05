// A per-machine cache of decompressed IDX files, so the workers of one
// machine inflate a gzipped dataset once between them (not once each) and
// share its bytes through the page cache (one mapped copy, not one private
// copy per worker).
//
//   StatusOr<IdxFile> f = ReadIdxCached(path, {.dir = IdxCacheDir()});   // dir "" = no cache
//
// A cache entry is the decompressed file, named after the source's base name,
// a hash of its canonical path, and a hash of its path, size, modification
// time and inode, so a changed source never matches an old entry; publishing
// the entry of a changed source removes the entries of its earlier versions. The first process to miss
// inflates under an exclusive lock (flock on `<entry>.lock`) and publishes
// the entry by rename; the others wait for the lock (bounded) and map the
// entry. Everything the cache cannot do (directory not writable, disk full,
// lock not granted in time) falls back to reading the source directly, with
// one warning: the cache only ever makes loading faster, never fail. Errors
// are those of IdxFile::Read on the source. Small sources (inflating
// to under min_inflated_bytes) are read directly: inflating them costs nothing, and
// they would only fill the directory.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "common/status.h"
#include "worker/data/idx_file.h"

namespace mirrored::data {

// The cache directory: $MIRRORED_DATA_CACHE if set ("off" or "" disables the
// cache: returns ""), else $XDG_CACHE_HOME/mirrored/datasets, else
// $HOME/.cache/mirrored/datasets, else "" (no cache).
std::string IdxCacheDir();

struct IdxCacheOptions {
  std::string dir;                                       // "" = no cache
  std::chrono::milliseconds lock_timeout{60000};         // waiting for another process's inflate
  size_t min_inflated_bytes = size_t{1} << 20;           // gzipped sources inflating to less are not cached
  bool accept_float32 = false;                           // IdxFile::Read's: float32 IDX files too
};

StatusOr<IdxFile> ReadIdxCached(const std::string& path, const IdxCacheOptions& options);

}  // namespace mirrored::data
