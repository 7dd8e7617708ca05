// Whether a checkpoint was trained on data of the shape --data gives: its
// state.json records the images' height, width and channels and the class
// count (absent in checkpoints of earlier versions: nothing to check). The
// trainer refuses to resume, and the evaluator to evaluate, one of other
// data.
//
//   MIRRORED_RETURN_IF_ERROR(CheckpointFitsData(latest.info, {28, 28, 1}, 10, "--data /data/fmnist"));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/run_dir/checkpoint_reader.h"
#include "common/status.h"

namespace mirrored {

// InvalidArgument (exit 2) naming both shapes, `data_name` and the
// checkpoint, when they differ.
Status CheckpointFitsData(const CheckpointInfo& checkpoint, const std::vector<int64_t>& image, int64_t classes,
                          const std::string& data_name);

}  // namespace mirrored
