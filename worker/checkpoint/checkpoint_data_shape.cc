#include "worker/checkpoint/checkpoint_data_shape.h"

namespace mirrored {
namespace {

std::string Describe(const std::vector<int64_t>& image, int64_t classes) {
  std::string s;
  for (int64_t d : image) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s + " images in " + std::to_string(classes) + " class" + (classes == 1 ? "" : "es");
}

}  // namespace

Status CheckpointFitsData(const CheckpointInfo& checkpoint, const std::vector<int64_t>& image, int64_t classes,
                          const std::string& data_name) {
  const CheckpointState& st = checkpoint.state;
  if (st.data_shape.empty() || (st.data_shape == image && st.classes == classes)) return OkStatus();
  return InvalidArgumentError(data_name + " gives " + Describe(image, classes) + ", but " + checkpoint.dir +
                              " was trained on " + Describe(st.data_shape, st.classes) +
                              " (its state.json): give the data it was trained on, or use another --run-dir");
}

}  // namespace mirrored
