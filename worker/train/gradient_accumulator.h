// Gradient accumulation (--accumulate-steps K): the gradients of K
// micro-batches summed into one optimizer step, with one all-reduce. The
// first K - 1 backward passes run without the bucketer; after each, Keep()
// adds the gradient buffer into a sum of the same layout. During the last
// backward pass, AddTo(i) adds that sum into tensor i's fresh gradient just
// before the bucketer is told it is ready, so only the last micro-batch's
// backward fires the all-reduces, and they carry all K micro-batches. Each
// micro-batch's loss is scaled by the whole step's global batch (and the
// fp16 loss scale, fixed within a step), so the sum is the large batch's
// gradient.
//
//   GradientAccumulator acc(backend, store.grads_data(), store.params_size(), spans);
//   for k < K - 1: forward; model.Backward(w, {}); acc.Keep(k);
//   forward; bucketer.BeginStep(); model.Backward(w, [&](int i) { acc.AddTo(i); bucketer.Ready(i); });
//
// On a GPU every operation is a kernel on the backend's stream, after the
// backward kernels that wrote the gradients and before the event the
// bucketer's fence records for them.
#pragma once

#include <cstddef>
#include <vector>

#include "worker/model/backend.h"
#include "worker/train/gradient_bucketer.h"

namespace mirrored {

class GradientAccumulator {
 public:
  // `grads` (params_size floats, on `backend`'s device) is the model's
  // gradient buffer; `tensors` its trainable tensors' spans, in declaration
  // order (the indices backward reports).
  GradientAccumulator(model::Backend& backend, float* grads, size_t size, std::vector<BucketSpan> tensors);
  ~GradientAccumulator();
  GradientAccumulator(const GradientAccumulator&) = delete;
  GradientAccumulator& operator=(const GradientAccumulator&) = delete;

  // After micro-batch `micro_batch`'s backward (0 to K - 2): its gradients
  // start (0) or join the sum.
  void Keep(int micro_batch);
  // During the last micro-batch's backward, once tensor `index`'s gradient
  // is written (issued, on a GPU): the sum of the earlier ones is added in.
  void AddTo(int index);

 private:
  model::Backend& backend_;
  float* grads_;
  size_t size_;
  std::vector<BucketSpan> tensors_;
  float* sum_;
};

}  // namespace mirrored
