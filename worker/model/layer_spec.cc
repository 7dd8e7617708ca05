#include "worker/model/layer_spec.h"

#include <stdexcept>

#include "worker/model/avg_pool2d_layer.h"
#include "worker/model/batch_norm_layer.h"
#include "worker/model/conv2d_layer.h"
#include "worker/model/dense_layer.h"
#include "worker/model/dropout_layer.h"
#include "worker/model/flatten_layer.h"
#include "worker/model/global_avg_pool_layer.h"
#include "worker/model/max_pool2d_layer.h"
#include "worker/model/relu_layer.h"
#include "worker/model/rescaling_layer.h"

namespace mirrored::model {
namespace {

std::string ShapeText(Shape3 s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c);
}

// A window sliding over `in`, unpadded ("valid") or padded "same" (each
// axis by SamePadding of its own length: never too small).
StatusOr<Shape3> WindowOutput(Shape3 in, int window, int stride, bool same, int channels, const std::string& what) {
  const AxisPadding ph = same ? SamePadding(in.h, window, stride) : AxisPadding{};
  const AxisPadding pw = same ? SamePadding(in.w, window, stride) : AxisPadding{};
  const int h = WindowOutputSize(in.h, window, stride, ph), w = WindowOutputSize(in.w, window, stride, pw);
  if (h < 1 || w < 1) {
    return InvalidArgumentError("its " + what + " window of " + std::to_string(window) + "x" +
                                std::to_string(window) + " does not fit its " + ShapeText(in) + " input");
  }
  return Shape3{h, w, channels};
}

}  // namespace

StatusOr<Shape3> LayerSpec::OutputShape(Shape3 in) const {
  switch (kind) {
    case LayerKind::kDense:
      if (in.h * in.w != 1) {
        return InvalidArgumentError("its input is " + ShapeText(in) +
                                    ": Keras applies Dense to the last axis of such an input, mirrored only to a "
                                    "flat one; put Flatten or GlobalAveragePooling2D before it");
      }
      return Shape3{1, 1, units};
    case LayerKind::kConv2D:
      return WindowOutput(in, kernel, stride, same_padding, units, "kernel");
    case LayerKind::kMaxPool2D:
    case LayerKind::kAvgPool2D:
      return WindowOutput(in, kernel, stride, false, in.c, "pooling");
    case LayerKind::kFlatten:
      return Shape3{1, 1, int(in.size())};
    case LayerKind::kGlobalAvgPool:
      return Shape3{1, 1, in.c};
    case LayerKind::kBatchNorm:
    case LayerKind::kRelu:
    case LayerKind::kDropout:
    case LayerKind::kRescaling:
    case LayerKind::kAdd:
      return in;
  }
  return InternalError("unknown layer kind");
}

std::unique_ptr<Layer> MakeLayer(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::kDense:
      return std::make_unique<DenseLayer>(s.name, s.units, s.relu, s.init);
    case LayerKind::kConv2D:
      return std::make_unique<Conv2DLayer>(s.name, Conv2DOptions{.filters = s.units, .kernel = s.kernel,
                                                                 .stride = s.stride, .same_padding = s.same_padding,
                                                                 .bias = s.bias, .relu = s.relu, .init = s.init});
    case LayerKind::kMaxPool2D:
      return std::make_unique<MaxPool2DLayer>(s.name, s.kernel, s.stride);
    case LayerKind::kAvgPool2D:
      return std::make_unique<AvgPool2DLayer>(s.name, s.kernel, s.stride);
    case LayerKind::kBatchNorm:
      return std::make_unique<BatchNormLayer>(s.name, s.momentum, s.epsilon);
    case LayerKind::kRelu:
      return std::make_unique<ReluLayer>(s.name);
    case LayerKind::kFlatten:
      return std::make_unique<FlattenLayer>(s.name);
    case LayerKind::kGlobalAvgPool:
      return std::make_unique<GlobalAvgPoolLayer>(s.name);
    case LayerKind::kDropout:
      return std::make_unique<DropoutLayer>(s.name, s.rate);
    case LayerKind::kRescaling:
      return std::make_unique<RescalingLayer>(s.name, s.scale, s.offset);
    case LayerKind::kAdd:
      break;
  }
  throw std::invalid_argument("layer " + s.name + ": an Add is a LayerGraph sum, not a layer");
}

}  // namespace mirrored::model
