#include "worker/checkpoint/model_checkpoint.h"

#include <cmath>

namespace mirrored {
namespace {

void AddViews(const std::vector<model::TensorInfo>& tensors, const std::vector<float>& buffer,
              const std::string& suffix, std::vector<TensorView>* out) {
  for (const auto& t : tensors) {
    out->push_back(TensorView{t.name + suffix, DType::kF32, t.shape, buffer.data() + t.offset});
  }
}

Status CopyInto(const SafetensorsFile& file, const std::vector<model::TensorInfo>& tensors,
                const std::string& suffix, std::vector<float>* buffer) {
  for (const auto& t : tensors) {
    const std::string name = t.name + suffix;
    const auto* info = file.Find(name);
    if (info == nullptr) return DataLossError(file.file_name() + ": no tensor \"" + name + "\"");
    if (info->shape != t.shape) {
      std::string want, got;
      for (auto d : t.shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      for (auto d : info->shape) got += (got.empty() ? "" : ",") + std::to_string(d);
      return DataLossError(file.file_name() + ": tensor \"" + name + "\" has shape [" + got + "], the model needs [" +
                           want + "]");
    }
    MIRRORED_RETURN_IF_ERROR(file.CopyF32(name, buffer->data() + t.offset, static_cast<int64_t>(t.size)));
  }
  return OkStatus();
}

}  // namespace

ModelSnapshot ModelSnapshot::Take(model::Model& model, model::Optimizer& optimizer) {
  ModelSnapshot s;
  s.store_ = &model.store();
  s.params_ = model.store().DownloadParams();
  s.state_ = model.store().DownloadState();
  s.slot_names_ = optimizer.slot_names();
  for (size_t i = 0; i < s.slot_names_.size(); ++i) s.slots_.push_back(optimizer.DownloadSlot(i));
  s.iterations_ = optimizer.iterations();
  return s;
}

bool AllFinite(const std::vector<float>& values) {
  for (float x : values)
    if (!std::isfinite(x)) return false;
  return true;
}

bool ModelSnapshot::AllFinite() const {
  if (!mirrored::AllFinite(params_) || !mirrored::AllFinite(state_)) return false;
  for (const auto& slot : slots_)
    if (!mirrored::AllFinite(slot)) return false;
  return true;
}

CheckpointContents ModelSnapshot::Contents(const CheckpointState& state) const {
  CheckpointContents c;
  c.state = state;
  AddViews(store_->trainable(), params_, "", &c.model);
  AddViews(store_->state(), state_, "", &c.model);
  for (size_t i = 0; i < slots_.size(); ++i) AddViews(store_->trainable(), slots_[i], "/" + slot_names_[i], &c.optimizer);
  c.optimizer.push_back(TensorView{"iterations", DType::kI64, {}, &iterations_});
  return c;
}

Status RestoreModel(const LoadedCheckpoint& checkpoint, model::Model& model, model::Optimizer* optimizer) {
  auto& store = model.store();
  std::vector<float> params(store.params_size(), 0.0f), state(store.state_size(), 0.0f);
  MIRRORED_RETURN_IF_ERROR(CopyInto(checkpoint.model, store.trainable(), "", &params));
  MIRRORED_RETURN_IF_ERROR(CopyInto(checkpoint.model, store.state(), "", &state));
  MIRRORED_RETURN_IF_ERROR(store.UploadParams(params));
  if (store.state_size() > 0) MIRRORED_RETURN_IF_ERROR(store.UploadState(state));
  if (optimizer == nullptr) return OkStatus();
  for (size_t i = 0; i < optimizer->slot_names().size(); ++i) {
    std::vector<float> slot(store.params_size(), 0.0f);
    MIRRORED_RETURN_IF_ERROR(CopyInto(checkpoint.optimizer, store.trainable(), "/" + optimizer->slot_names()[i], &slot));
    MIRRORED_RETURN_IF_ERROR(optimizer->UploadSlot(i, slot));
  }
  int64_t iterations = 0;
  MIRRORED_RETURN_IF_ERROR(checkpoint.optimizer.CopyI64("iterations", &iterations, 1));
  optimizer->set_iterations(iterations);
  return OkStatus();
}

}  // namespace mirrored
