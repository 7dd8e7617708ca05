#include "worker/model/model.h"

#include <algorithm>
#include <stdexcept>

#include "worker/model/channels_last_input.h"
#include "worker/model/model_zoo.h"

namespace mirrored::model {

StatusOr<std::unique_ptr<Model>> Model::Create(const std::string& name, std::unique_ptr<Backend> backend,
                                               uint64_t seed, Shape3 input, int classes) {
  MIRRORED_ASSIGN_OR_RETURN(KerasModelJson keras, ReadZooModel(name, input, classes));
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(keras.BuildGraph());
  return std::make_unique<Model>(name, std::move(backend), std::move(layers), input, classes, seed);
}

Model::Model(std::string name, std::unique_ptr<Backend> backend, std::vector<std::unique_ptr<Layer>> layers,
             Shape3 input, int classes, uint64_t seed)
    : name_(std::move(name)), backend_(std::move(backend)), layers_(std::move(layers)), input_(input),
      classes_(classes), seed_(seed) {
  Shape3 s = input;
  for (auto& l : layers_) s = l->Build(s, &store_);
  if (int(s.size()) != classes) {
    throw std::invalid_argument("model " + name_ + ": last layer gives " + std::to_string(s.size()) +
                                " values per example, expected " + std::to_string(classes) + " logits");
  }
  store_.Allocate(backend_.get(), seed);
  for (auto& l : layers_) l->Bind(backend_.get(), &store_);
  SetBatchPosition(0, 0);
  for (DeviceArray* a : {&images_, &images_nhwc_, &labels_dev_, &weights_dev_, &losses_dev_, &probs_, &dlogits_})
    a->set_backend(backend_.get());
}

Model::~Model() {
  layers_.clear();  // kernels before the backend's engine
}

StatusOr<Loss> ParseLoss(const std::string& name) {
  if (name == "sparse_categorical_crossentropy") return Loss::kSparseCategoricalCrossentropy;
  if (name == "mse") return Loss::kMeanSquaredError;
  return InvalidArgumentError("--loss \"" + name + "\" is not one of sparse_categorical_crossentropy, mse");
}

const float* Model::RunLayers(int n, const float* images, bool training) {
  float* x = images_.Reserve(size_t(n) * input_.size());
  if (ReordersChannels(*backend_, input_)) {
    // Images arrive NHWC; an NCHW backend's layers read them reordered.
    float* staged = images_nhwc_.Reserve(size_t(n) * input_.size());
    backend_->Upload(images, staged, size_t(n) * input_.size());
    backend_->ChannelsLastToFirst(n, input_.h * input_.w, input_.c, staged, x);
  } else {
    backend_->Upload(images, x, size_t(n) * input_.size());
  }
  inputs_.resize(layers_.size());
  const float* h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    inputs_[i] = h;
    h = layers_[i]->Forward(n, h, training);
  }
  return h;
}

void Model::Forward(int n, const float* images, const int32_t* labels, bool training) {
  Forward(n, images, labels, nullptr, training);
}

void Model::Forward(int n, const float* images, const int32_t* labels, const float* targets, bool training) {
  n_ = n;
  if (n == 0) {  // an empty shard of a short last batch: nothing to run
    losses_.clear();
    logits_.clear();
    labels_.clear();
    return;
  }
  if (loss_ == Loss::kMeanSquaredError) {
    if (targets == nullptr) throw std::invalid_argument("model " + name_ + ": mse without targets");
    logits_dev_ = RunLayers(n, images, training);
    SquaredErrors(n, targets);
    return;
  }
  labels_.assign(labels, labels + n);
  labels_f_.assign(labels, labels + n);
  float* y = labels_dev_.Reserve(size_t(n));
  backend_->Upload(labels_f_.data(), y, size_t(n));
  const float* h = RunLayers(n, images, training);
  logits_dev_ = h;
  float* losses = losses_dev_.Reserve(size_t(n));
  float* probs = probs_.Reserve(size_t(n) * classes_);
  backend_->SoftmaxCrossEntropy(n, classes_, h, y, losses, probs);
  losses_.resize(size_t(n));
  logits_.resize(size_t(n) * classes_);
  backend_->Download(losses, losses_.data(), size_t(n));
  backend_->Download(h, logits_.data(), logits_.size());
}

void Model::SquaredErrors(int n, const float* targets) {
  // n x K values: the host computes the loss (nothing to gain on a device).
  const size_t k = size_t(classes_);
  logits_.resize(size_t(n) * k);
  backend_->Download(logits_dev_, logits_.data(), logits_.size());
  targets_.assign(targets, targets + size_t(n) * k);
  losses_.assign(size_t(n), 0.0f);
  for (size_t i = 0; i < size_t(n); ++i) {
    double sum = 0;
    for (size_t j = 0; j < k; ++j) {
      const double d = double(logits_[i * k + j]) - double(targets_[i * k + j]);
      sum += d * d;
    }
    losses_[i] = static_cast<float>(sum / double(k));
  }
}

double Model::MetricSum() const {
  if (loss_ != Loss::kMeanSquaredError) return static_cast<double>(CorrectCount());
  double sum = 0;
  for (float l : losses_) sum += l;
  return sum;
}

void Model::SetBatchPosition(int64_t step, int64_t first_example) {
  for (auto& l : layers_) l->SetBatchPosition({.seed = seed_, .step = step, .first_example = first_example});
}

int64_t Model::CorrectCount() const {
  int64_t correct = 0;
  for (int i = 0; i < n_; ++i) {
    const float* z = logits_.data() + size_t(i) * classes_;
    if (std::max_element(z, z + classes_) - z == labels_[size_t(i)]) ++correct;
  }
  return correct;
}

void Model::Backward(const float* example_weights, const GradientReadyFn& ready) {
  if (n_ == 0) {  // contributes zero gradients, still reported for the all-reduce
    backend_->Zero(store_.grads_data(), store_.params_size());
    for (size_t i = store_.trainable().size(); i-- > 0;)
      if (ready) ready(int(i));
    return;
  }
  float* w = weights_dev_.Reserve(size_t(n_));
  backend_->Upload(example_weights, w, size_t(n_));
  float* dy = dlogits_.Reserve(size_t(n_) * classes_);
  if (loss_ == Loss::kMeanSquaredError) {
    // d/dz of w_i * mean_j (z_ij - t_ij)^2 = w_i * 2 (z_ij - t_ij) / K.
    const size_t k = size_t(classes_);
    std::vector<float> grad(size_t(n_) * k);
    for (size_t i = 0; i < size_t(n_); ++i) {
      for (size_t j = 0; j < k; ++j) {
        grad[i * k + j] = example_weights[i] * 2.0f * (logits_[i * k + j] - targets_[i * k + j]) / float(k);
      }
    }
    backend_->Upload(grad.data(), dy, grad.size());
  } else {
    backend_->SoftmaxCrossEntropyBackward(n_, classes_, probs_.data(), labels_dev_.data(), w, dy);
  }
  for (size_t i = layers_.size(); i-- > 0;) dy = layers_[i]->Backward(n_, inputs_[i], dy, i > 0, ready);
}

}  // namespace mirrored::model
