#include "worker/model/conv2d_layer.h"

namespace mirrored::model {

Shape3 Conv2DLayer::Build(Shape3 input, ParameterStore* store) {
  spec_ = ConvSpec{.in_h = input.h, .in_w = input.w, .in_c = input.c, .out_c = o_.filters, .kernel = o_.kernel,
                   .stride = o_.stride, .bias = o_.bias, .relu = o_.relu};
  if (o_.same_padding) spec_.SamePadded();
  const int k2 = o_.kernel * o_.kernel;
  kernel_ = store->AddTrainable(name() + "/kernel", {o_.kernel, o_.kernel, input.c, o_.filters}, o_.init,
                                k2 * input.c, k2 * o_.filters);
  if (o_.bias) bias_ = store->AddTrainable(name() + "/bias", {o_.filters}, Init::kZeros);
  return {spec_.out_h(), spec_.out_w(), o_.filters};
}

void Conv2DLayer::Bind(Backend* backend, ParameterStore* store) {
  backend_ = backend;
  store_ = store;
  y_.set_backend(backend);
  dx_.set_backend(backend);
  impl_ = backend->MakeConv(spec_);
}

const float* Conv2DLayer::Forward(int n, const float* x, bool) {
  float* y = y_.Reserve(size_t(n) * spec_.out_h() * spec_.out_w() * spec_.out_c);
  impl_->Forward(n, x, store_->param(kernel_), o_.bias ? store_->param(bias_) : nullptr, y);
  return y;
}

float* Conv2DLayer::Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) {
  if (o_.relu && mask_dy_) backend_->ReluMask(y_.data(), dy, size_t(n) * spec_.out_h() * spec_.out_w() * spec_.out_c);
  float* dx = need_dx ? dx_.Reserve(size_t(n) * spec_.in_h * spec_.in_w * spec_.in_c) : nullptr;
  impl_->Backward(n, x, store_->param(kernel_), dy, dx, store_->grad(kernel_),
                  o_.bias ? store_->grad(bias_) : nullptr);
  if (ready) {
    if (o_.bias) ready(bias_);
    ready(kernel_);
  }
  return dx;
}

}  // namespace mirrored::model
