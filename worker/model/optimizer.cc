#include "worker/model/optimizer.h"

#include <cmath>

namespace mirrored::model {

StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const std::string& name, float learning_rate, float momentum) {
  if (name != "adam" && name != "sgd") {
    return InvalidArgumentError("--optimizer \"" + name + "\" is not one of adam, sgd");
  }
  if (!(learning_rate > 0.f) || !std::isfinite(learning_rate)) {
    return InvalidArgumentError("--lr must be a positive number, got " + std::to_string(learning_rate));
  }
  return std::unique_ptr<Optimizer>(new Optimizer(name, learning_rate, momentum));
}

Optimizer::Optimizer(std::string name, float lr, float momentum) : name_(std::move(name)), lr_(lr), momentum_(momentum) {
  if (name_ == "adam") {
    slot_names_ = {"m", "v"};
  } else {
    slot_names_ = {"momentum"};
  }
}

Optimizer::~Optimizer() {
  for (float* s : slots_) backend_->Free(s);
}

void Optimizer::Bind(ParameterStore* store, Backend* backend) {
  store_ = store;
  backend_ = backend;
  for (size_t i = 0; i < slot_names_.size(); ++i) slots_.push_back(backend->Allocate(store->params_size()));
}

void Optimizer::Apply() {
  ++iterations_;
  const size_t count = store_->params_size();
  if (name_ == "adam") {
    const double t = double(iterations_);
    const float lr_t = float(lr_ * std::sqrt(1 - std::pow(double(beta2_), t)) / (1 - std::pow(double(beta1_), t)));
    backend_->AdamUpdate(count, store_->params_data(), store_->grads_data(), slots_[0], slots_[1], lr_t, beta1_,
                         beta2_, epsilon_);
  } else {
    backend_->SgdMomentumUpdate(count, store_->params_data(), store_->grads_data(), slots_[0], lr_, momentum_);
  }
}

bool Optimizer::ApplyLossScaled(DynamicLossScale& loss_scale) {
  const bool finite =
      backend_->UnscaleAndCheckFinite(store_->grads_data(), store_->params_size(), 1.f / loss_scale.scale());
  if (!loss_scale.Update(finite)) return false;
  Apply();
  return true;
}

std::vector<float> Optimizer::DownloadSlot(size_t i) const {
  std::vector<float> h(store_->params_size());
  backend_->Download(slots_[i], h.data(), h.size());
  return h;
}

Status Optimizer::UploadSlot(size_t i, const std::vector<float>& host) {
  if (i >= slots_.size()) return InvalidArgumentError("optimizer " + name_ + " has no slot " + std::to_string(i));
  if (host.size() != store_->params_size()) {
    return InvalidArgumentError("optimizer slot " + slot_names_[i] + " has " + std::to_string(host.size()) +
                                " floats, the model needs " + std::to_string(store_->params_size()));
  }
  backend_->Upload(host.data(), slots_[i], host.size());
  return OkStatus();
}

}  // namespace mirrored::model
