#include "worker/model/dropout_layer.h"

namespace mirrored::model {
namespace {

// SplitMix64's finaliser: a bijection that spreads every input bit.
uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

DropoutLayer::DropoutLayer(std::string name, float rate)
    : Layer(std::move(name)), rate_(rate), name_hash_(Fnv1a(this->name())) {}

Shape3 DropoutLayer::Build(Shape3 input, ParameterStore*) {
  shape_ = input;
  return input;
}

void DropoutLayer::Bind(Backend* backend, ParameterStore*) {
  backend_ = backend;
  mask_.set_backend(backend);
  y_.set_backend(backend);
}

float DropoutLayer::MaskValue(const BatchPosition& position, int64_t example, size_t index) const {
  const uint64_t step_key = Mix(Mix(position.seed ^ name_hash_) ^ uint64_t(position.step));
  const uint64_t u = Mix(Mix(step_key ^ uint64_t(example)) ^ index);
  const float uniform = float(u >> 40) * 0x1p-24f;  // [0, 1), 24 bits
  return uniform < rate_ ? 0.f : 1.f / (1.f - rate_);
}

const float* DropoutLayer::Forward(int n, const float* x, bool training) {
  if (!training || rate_ <= 0.f) return x;
  const size_t per_example = shape_.size(), count = size_t(n) * per_example;
  host_mask_.resize(count);
  for (int i = 0; i < n; ++i) {
    const int64_t example = position_.first_example + i;
    float* m = host_mask_.data() + size_t(i) * per_example;
    for (size_t k = 0; k < per_example; ++k) m[k] = MaskValue(position_, example, k);
  }
  float* mask = mask_.Reserve(count);
  backend_->Upload(host_mask_.data(), mask, count);
  float* y = y_.Reserve(count);
  backend_->Multiply(x, mask, y, count);
  return y;
}

float* DropoutLayer::Backward(int n, const float*, float* dy, bool need_dx, const GradientReadyFn&) {
  if (!need_dx) return nullptr;
  if (rate_ > 0.f) backend_->Multiply(dy, mask_.data(), dy, size_t(n) * shape_.size());
  return dy;
}

}  // namespace mirrored::model
