// The interface every layer implements. A layer is built once against a
// ParameterStore (declaring its named tensors and returning its output
// shape), bound to a Backend once the store is allocated, then run:
// Forward keeps what Backward needs; Backward writes (not accumulates) its
// parameters' gradients and reports each one final through `ready`, in
// strictly decreasing parameter index, before returning.
//
//   Shape3 out = layer->Build({28, 28, 1}, &store);   // then store.Allocate(...)
//   layer->Bind(backend, &store);
//   const float* y = layer->Forward(n, x, /*training=*/true);  float* dx = layer->Backward(n, x, dy, true, ready);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "worker/model/backend.h"
#include "worker/model/parameter_store.h"

namespace mirrored::model {

// Called with a trainable tensor's index once its gradient is final.
using GradientReadyFn = std::function<void(int param_index)>;

// Per-example shape (h, w, c), whatever order the backend keeps it in memory
// (Backend::channels_first); a flat vector is {1, 1, size}.
struct Shape3 {
  int h = 1, w = 1, c = 1;
  size_t size() const { return size_t(h) * w * c; }
  friend bool operator==(const Shape3&, const Shape3&) = default;
};

// Where the examples of a training Forward sit in the job: the model's
// seed, the optimizer step and the index of the first example within the
// step's global batch. Seeded random layers (Dropout) key their draws by it,
// so an example gets the same mask whichever replica runs it.
struct BatchPosition {
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t first_example = 0;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }

  // Declares the layer's tensors (named "<layer>/<tensor>") and returns the
  // output shape for `input`.
  virtual Shape3 Build(Shape3 input, ParameterStore* store) = 0;
  // Creates the kernels; `store` is allocated and outlives the layer's use.
  virtual void Bind(Backend* backend, ParameterStore* store) = 0;
  // y for the n examples of x (device memory). The result is owned by the
  // layer (or is x itself) and stays valid until the next Forward.
  virtual const float* Forward(int n, const float* x, bool training) = 0;
  // dy: gradient w.r.t. the last Forward's output, which the layer may
  // overwrite; x: that Forward's input. Returns dx (owned by the layer, or
  // dy itself), or nullptr when !need_dx.
  virtual float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) = 0;
  // Called before each Forward with where its examples sit; only layers
  // that draw random numbers (or hold such layers) need it.
  virtual void SetBatchPosition(const BatchPosition&) {}

  // The ReLU-mask fold, which LayerGraph::Bind sets up between a layer
  // that ends with a ReLU and the layer alone reading its output: where
  // the reader can apply the ReLU's backward inside its own (max pooling
  // sends gradient only to window maxima, which then must be > 0), the
  // first layer skips its pass over dy that masks it. Results are the
  // same bit for bit. All three are called after Bind, before any Forward.
  //   EndsWithRelu: the output is max(., 0) and Backward masks dy by it.
  //   FoldInputReluMask: Backward will return dx zero wherever x is not
  //     above 0; false (the default) where the layer cannot.
  //   SkipReluMask: Backward receives dy already masked from now on.
  virtual bool EndsWithRelu() const { return false; }
  virtual bool FoldInputReluMask() { return false; }
  virtual void SkipReluMask() {}

 private:
  std::string name_;
};

}  // namespace mirrored::model
