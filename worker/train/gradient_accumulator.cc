#include "worker/train/gradient_accumulator.h"

#include <utility>

namespace mirrored {

GradientAccumulator::GradientAccumulator(model::Backend& backend, float* grads, size_t size,
                                         std::vector<BucketSpan> tensors)
    : backend_(backend), grads_(grads), size_(size), tensors_(std::move(tensors)), sum_(backend.Allocate(size)) {}

GradientAccumulator::~GradientAccumulator() { backend_.Free(sum_); }

void GradientAccumulator::Keep(int micro_batch) {
  if (micro_batch == 0) {
    backend_.Copy(grads_, sum_, size_);
  } else {
    backend_.Accumulate(grads_, sum_, size_);
  }
}

void GradientAccumulator::AddTo(int index) {
  const BucketSpan& t = tensors_[static_cast<size_t>(index)];
  backend_.Accumulate(sum_ + t.offset, grads_ + t.offset, t.size);
}

}  // namespace mirrored
