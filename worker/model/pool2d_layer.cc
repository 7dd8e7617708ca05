#include "worker/model/pool2d_layer.h"

namespace mirrored::model {

Shape3 Pool2DLayer::Build(Shape3 input, ParameterStore*) {
  spec_ = PoolSpec{input.h, input.w, input.c, size_, stride_};
  return {spec_.out_h(), spec_.out_w(), input.c};
}

void Pool2DLayer::Bind(Backend* backend, ParameterStore*) {
  y_.set_backend(backend);
  dx_.set_backend(backend);
  impl_ = kind_ == PoolKind::kMax ? backend->MakeMaxPool(spec_) : backend->MakeAvgPool(spec_);
}

const float* Pool2DLayer::Forward(int n, const float* x, bool training) {
  float* y = y_.Reserve(size_t(n) * spec_.out_h() * spec_.out_w() * spec_.channels);
  // Reserved here: growing it in Backward would free memory (a device
  // synchronisation) while bucket all-reduces are in flight.
  if (training) dx_.Reserve(size_t(n) * spec_.in_h * spec_.in_w * spec_.channels);
  impl_->Forward(n, x, y, training);
  return y;
}

float* Pool2DLayer::Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn&) {
  if (!need_dx) return nullptr;
  float* dx = dx_.Reserve(size_t(n) * spec_.in_h * spec_.in_w * spec_.channels);
  impl_->Backward(n, x, y_.data(), dy, dx);
  return dx;
}

}  // namespace mirrored::model
