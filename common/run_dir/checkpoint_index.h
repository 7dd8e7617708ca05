// Names inside RUN_DIR/checkpoints/ and the `checkpoint` index file:
//   checkpoints/checkpoint          {"latest": "ckpt-600", "kept": ["ckpt-400", "ckpt-600"],
//                                    "pruned": ["ckpt-200"]}
// "pruned" (absent when empty) lists the checkpoints the chief deleted to
// keep --keep-checkpoints, the newest kMaxPrunedListed, since the start its
// run resumed from (an evaluator started late names the ones it missed).
// A malformed "pruned" reads as empty (it is advisory); a writer from before
// it existed drops it.
//   checkpoints/ckpt-<step>/        a complete checkpoint (decimal step, no padding)
//   checkpoints/.tmp-*              being written or deleted; readers ignore every "." name
// The index is a convenience for tools and operators; readers trust the
// ckpt-* directories they validate over it (a crash may leave it one behind).
//
//   std::string dir = JoinPath(CheckpointsDir(run_dir), CheckpointDirName(600));   // ckpt-600
//   std::optional<int64_t> step = ParseCheckpointDirName("ckpt-600");                // 600
//   MIRRORED_ASSIGN_OR_RETURN(CheckpointIndex idx, CheckpointIndex::Read(env, run_dir));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/run_dir/file_env.h"

namespace mirrored {

inline constexpr char kModelFileName[] = "model.safetensors";
inline constexpr char kOptimizerFileName[] = "optimizer.safetensors";
inline constexpr char kStateFileName[] = "state.json";
inline constexpr char kIndexFileName[] = "checkpoint";
inline constexpr char kTempPrefix[] = ".tmp-";

std::string CheckpointsDir(const std::string& run_dir);  // RUN_DIR/checkpoints
std::string CheckpointDirName(int64_t step);             // "ckpt-<step>"
// The step of "ckpt-<step>"; nullopt for any other name (".tmp-ckpt-5-..", "ckpt-05").
std::optional<int64_t> ParseCheckpointDirName(const std::string& name);

inline constexpr size_t kMaxPrunedListed = 1000;

struct CheckpointIndex {
  std::optional<int64_t> latest;  // step of the newest checkpoint written
  std::vector<int64_t> kept;      // steps kept after pruning, ascending
  std::vector<int64_t> pruned;    // steps deleted by pruning, ascending

  std::string ToJsonText() const;
  // DataLoss naming the file when the JSON or a name in it is malformed.
  static StatusOr<CheckpointIndex> FromJsonText(std::string_view text,
                                                const std::string& file_name);
  // NotFound when there is no index yet.
  static StatusOr<CheckpointIndex> Read(FileEnv* env, const std::string& run_dir);
  // Replaces the index atomically (temp file, fsync, rename, directory fsync).
  Status Write(FileEnv* env, const std::string& run_dir) const;

  friend bool operator==(const CheckpointIndex&, const CheckpointIndex&) = default;
};

}  // namespace mirrored
