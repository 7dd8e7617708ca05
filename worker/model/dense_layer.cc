#include "worker/model/dense_layer.h"

namespace mirrored::model {

Shape3 DenseLayer::Build(Shape3 input, ParameterStore* store) {
  in_ = int(input.size());
  in_shape_ = input;
  kernel_ = store->AddTrainable(name() + "/kernel", {in_, units_}, init_, in_, units_);
  bias_ = store->AddTrainable(name() + "/bias", {units_}, Init::kZeros);
  return {1, 1, units_};
}

void DenseLayer::Bind(Backend* backend, ParameterStore* store) {
  backend_ = backend;
  store_ = store;
  y_.set_backend(backend);
  dx_.set_backend(backend);
  kernel_impl_ = backend->MakeDense({in_, units_, relu_});
  order_.Bind(backend, in_shape_);
}

const float* DenseLayer::Forward(int n, const float* x, bool) {
  float* y = y_.Reserve(size_t(n) * units_);
  kernel_impl_->Forward(n, order_.Forward(n, x), store_->param(kernel_), store_->param(bias_), y);
  return y;
}

float* DenseLayer::Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) {
  if (relu_) backend_->ReluMask(y_.data(), dy, size_t(n) * units_);
  float* dx = need_dx ? dx_.Reserve(size_t(n) * in_) : nullptr;
  kernel_impl_->Backward(n, order_.Last(x), store_->param(kernel_), dy, dx, store_->grad(kernel_),
                         store_->grad(bias_));
  if (ready) {
    ready(bias_);
    ready(kernel_);
  }
  return order_.Backward(n, dx);
}

}  // namespace mirrored::model
