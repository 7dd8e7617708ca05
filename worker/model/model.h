// A classifier made of layers over one Backend: owns the backend, the
// ParameterStore (contiguous parameter / gradient / state buffers with named
// views) and the activations. One Model per replica thread; nothing mutable
// is shared between models. Models by name: "mlp", "cnn", "resnet"
// (worker/model/model_zoo.h documents them).
//
//   StatusOr<std::unique_ptr<Model>> m = Model::Create("cnn", MakeCpuBackend(), /*seed=*/1);
//   (*m)->Forward(n, images, labels, /*training=*/true);      // host inputs
//   (*m)->Backward(weights, [&](int i) { bucketer.Ready(i); });  // weights[i] = 1 / global_batch
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/backend.h"
#include "worker/model/device_array.h"
#include "worker/model/layer.h"
#include "worker/model/parameter_store.h"

namespace mirrored::model {

// The loss Forward computes: softmax cross-entropy against class labels
// (Keras' sparse_categorical_crossentropy, from logits), or the mean
// squared error against float targets (Keras' mse: the mean over the K
// outputs of each example).
enum class Loss { kSparseCategoricalCrossentropy, kMeanSquaredError };
// "sparse_categorical_crossentropy" or "mse" (--loss); InvalidArgument otherwise.
StatusOr<Loss> ParseLoss(const std::string& name);

class Model {
 public:
  // A named model from the zoo for `input` images and `classes` classes
  // (by default Fashion-MNIST's). InvalidArgument for an unknown name or
  // an input the model cannot take (model_zoo.h's CheckZooInput).
  static StatusOr<std::unique_ptr<Model>> Create(const std::string& name, std::unique_ptr<Backend> backend,
                                                 uint64_t seed, Shape3 input = {28, 28, 1}, int classes = 10);
  // Any stack of layers (tests): input shape per example, `classes` logits.
  Model(std::string name, std::unique_ptr<Backend> backend, std::vector<std::unique_ptr<Layer>> layers, Shape3 input,
        int classes, uint64_t seed);
  ~Model();

  const std::string& name() const { return name_; }
  Backend& backend() { return *backend_; }
  ParameterStore& store() { return store_; }
  Shape3 input_shape() const { return input_; }
  int classes() const { return classes_; }  // the last layer's outputs: classes, or the target width
  void set_loss(Loss loss) { loss_ = loss; }
  Loss loss() const { return loss_; }

  // Runs n examples (host NHWC images, host labels in [0, classes)) through
  // the network and the loss (n may be 0: an empty shard). After it, losses() holds the n per-example
  // cross-entropies and logits() the n x classes logits (host copies).
  void Forward(int n, const float* images, const int32_t* labels, bool training);
  // The same under Loss::kMeanSquaredError: `targets` are n x classes()
  // host floats (labels are then unused and may be null).
  void Forward(int n, const float* images, const int32_t* labels, const float* targets, bool training);
  const std::vector<float>& losses() const { return losses_; }
  const std::vector<float>& logits() const { return logits_; }
  // Where the next training Forwards' examples sit: the optimizer step and
  // the first example's index within the step's global batch (replica r of
  // B examples each: r * B). Dropout keys its masks by it (and the seed), so
  // any replica count draws the same masks. Default: step 0, example 0.
  void SetBatchPosition(int64_t step, int64_t first_example);

  // Examples of the last Forward whose arg-max logit equals the label.
  int64_t CorrectCount() const;
  // What the metric sums over the last Forward's examples: CorrectCount()
  // (accuracy), or under mse the sum of the per-example squared errors (mse).
  double MetricSum() const;

  // Gradient of sum_i example_weights[i] * losses[i] (host weights, n of
  // them, from the last training Forward) into store().grads_data(); `ready`
  // (may be empty) is called once per trainable tensor, in reverse order of
  // declaration, as soon as that tensor's gradient is final.
  void Backward(const float* example_weights, const GradientReadyFn& ready);

 private:
  std::string name_;
  std::unique_ptr<Backend> backend_;
  ParameterStore store_;  // declared after backend_: freed before it
  std::vector<std::unique_ptr<Layer>> layers_;
  Shape3 input_;
  int classes_;
  uint64_t seed_;
  int n_ = 0;
  std::vector<const float*> inputs_;  // each layer's input in the last Forward
  const float* logits_dev_ = nullptr;
  DeviceArray images_, images_nhwc_, labels_dev_, weights_dev_, losses_dev_, probs_, dlogits_;
  // The network up to the logits: their device pointer.
  const float* RunLayers(int n, const float* images, bool training);
  void SquaredErrors(int n, const float* targets);

  Loss loss_ = Loss::kSparseCategoricalCrossentropy;
  std::vector<float> targets_;  // the last Forward's (mse)
  std::vector<float> labels_f_, losses_, logits_;
  std::vector<int32_t> labels_;
};

}  // namespace mirrored::model
