// SGD with momentum and Adam over a model's whole parameter buffer: one
// fused update per step on the contiguous buffers. The slots have the
// parameter buffer's layout, so each slot tensor is the parameter's view
// under a suffixed name ("conv1/kernel/m"); `iterations` is the step count.
//
//   StatusOr<std::unique_ptr<Optimizer>> opt = Optimizer::Create("adam", 1e-3f);
//   (*opt)->Bind(&model->store(), &model->backend());
//   (*opt)->Apply();   // after the gradients are final (all-reduced)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/backend.h"
#include "worker/model/loss_scale.h"
#include "worker/model/parameter_store.h"

namespace mirrored::model {

class Optimizer {
 public:
  // "adam" (beta1 0.9, beta2 0.999, epsilon 1e-7, Keras defaults) or "sgd"
  // (momentum 0.9). InvalidArgument for another name or lr <= 0.
  static StatusOr<std::unique_ptr<Optimizer>> Create(const std::string& name, float learning_rate,
                                                     float momentum = 0.9f);
  ~Optimizer();

  // Allocates the zeroed slots for `store`'s parameters on `backend`.
  void Bind(ParameterStore* store, Backend* backend);
  // One update of every parameter from its gradient.
  void Apply();
  // The same for gradients of a loss multiplied by loss_scale.scale(): they
  // are divided by it, then applied unless one was not finite, in which
  // case the step is skipped (iterations unchanged) and the scale lowered.
  // Returns whether the update was applied. Replicas holding the same
  // all-reduced gradients all decide alike.
  bool ApplyLossScaled(DynamicLossScale& loss_scale);

  const std::string& name() const { return name_; }
  float learning_rate() const { return lr_; }
  void set_learning_rate(float lr) { lr_ = lr; }
  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t t) { iterations_ = t; }

  // Slot suffixes ("m", "v" for Adam; "momentum" for SGD) and their buffers
  // (params_size() floats each, parameter layout).
  const std::vector<std::string>& slot_names() const { return slot_names_; }
  float* slot_data(size_t i) { return slots_[i]; }
  std::vector<float> DownloadSlot(size_t i) const;
  Status UploadSlot(size_t i, const std::vector<float>& host);

 private:
  Optimizer(std::string name, float lr, float momentum);

  std::string name_;
  float lr_, momentum_;
  float beta1_ = 0.9f, beta2_ = 0.999f, epsilon_ = 1e-7f;
  int64_t iterations_ = 0;
  ParameterStore* store_ = nullptr;
  Backend* backend_ = nullptr;
  std::vector<std::string> slot_names_;
  std::vector<float*> slots_;
};

}  // namespace mirrored::model
