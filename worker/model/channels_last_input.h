// What flattens a 4-D activation (Flatten, Dense) reads it in Keras's order,
// NHWC, whatever the backend's layout (Backend::channels_first): on an NCHW
// backend the input is reordered into a buffer held here and the gradient
// reordered back. No copy at all on an NHWC backend, nor for an input with
// one channel or one pixel, where the two orders are the same.
//
//   ChannelsLastInput in;
//   in.Bind(backend, {5, 5, 64});
//   const float* x_nhwc = in.Forward(n, x);   // what the dense GEMM reads
//   float* dx = in.Backward(n, dx_nhwc);      // back in the backend's layout
#pragma once

#include "worker/model/backend.h"
#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

// Whether an activation of `shape` lies differently on `backend` than in
// NHWC order: on a channels-first backend, with more than one channel and
// more than one pixel.
inline bool ReordersChannels(const Backend& backend, Shape3 shape) {
  return backend.channels_first() && shape.c > 1 && shape.h * shape.w > 1;
}

class ChannelsLastInput {
 public:
  void Bind(Backend* backend, Shape3 shape) {
    backend_ = backend;
    shape_ = shape;
    reorder_ = ReordersChannels(*backend, shape);
    x_.set_backend(backend);
    dx_.set_backend(backend);
  }

  // x in NHWC order: x itself, or the reordered copy (kept until the next Forward).
  const float* Forward(int n, const float* x) {
    if (!reorder_) return x;
    float* y = x_.Reserve(size_t(n) * shape_.size());
    // The gradient's buffer too: growing it in Backward would free memory
    // (a device synchronisation) while bucket all-reduces are in flight.
    dx_.Reserve(size_t(n) * shape_.size());
    backend_->ChannelsFirstToLast(n, shape_.h * shape_.w, shape_.c, x, y);
    return y;
  }
  // What the last Forward returned for `x`.
  const float* Last(const float* x) const { return reorder_ ? x_.data() : x; }
  // A gradient in NHWC order, in the backend's layout (dx_last itself or a copy).
  float* Backward(int n, float* dx_last) {
    if (!reorder_ || dx_last == nullptr) return dx_last;
    float* dx = dx_.Reserve(size_t(n) * shape_.size());
    backend_->ChannelsLastToFirst(n, shape_.h * shape_.w, shape_.c, dx_last, dx);
    return dx;
  }

 private:
  Backend* backend_ = nullptr;
  Shape3 shape_;
  bool reorder_ = false;
  DeviceArray x_, dx_;
};

}  // namespace mirrored::model
