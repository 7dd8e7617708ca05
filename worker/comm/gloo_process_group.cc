#include "worker/comm/gloo_process_group.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "worker/comm/half_conversion.h"

namespace mirrored {
namespace {

// Gloo reports failures by exceptions; turn them into our error vocabulary.
Status FromGloo(const std::exception& e, const char* what) {
  std::string msg = std::string("gloo ") + what + ": " + e.what();
  if (msg.find("Timed out") != std::string::npos || msg.find("timed out") != std::string::npos) {
    return DeadlineExceededError(msg);
  }
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) return UnavailableError(msg);
  return InternalError(msg);
}

// One gloo all-reduce of `count` elements of T in place, reduced by `fn`.
template <typename T>
Status RunAllreduce(const std::shared_ptr<gloo::Context>& context, T* data, size_t count,
                    gloo::AllreduceOptions::Func fn, uint32_t tag, std::chrono::milliseconds timeout) {
  try {
    gloo::AllreduceOptions opts(context);
    opts.setOutput(data, count);
    opts.setReduceFunction(std::move(fn));
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
    return OkStatus();
  } catch (const std::exception& e) {
    return FromGloo(e, "all-reduce");
  }
}

}  // namespace

StatusOr<std::unique_ptr<GlooProcessGroup>> GlooProcessGroup::Connect(
    gloo::rendezvous::Store& store, const GlooProcessGroupOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgumentError("process rank " + std::to_string(options.rank) +
                                " is out of range for " + std::to_string(options.size) + " processes");
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.interface_address;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<GlooProcessGroup>(new GlooProcessGroup(options, std::move(context)));
  } catch (const std::exception& e) {
    return FromGloo(e, "rendezvous");
  }
}

GlooProcessGroup::~GlooProcessGroup() = default;

void GlooProcessGroup::Abort() {
  if (aborted_.exchange(true)) return;
  context_->closeConnections();
}

Status GlooProcessGroup::AllReduce(float* data, size_t count, ReduceOp op) {
  if (count == 0 || options_.size == 1) return OkStatus();
  if (aborted_) return AbortedError("the process group was aborted");
  using Fn = void (*)(void*, const void*, const void*, size_t);
  const Fn fn = op == ReduceOp::kMax ? static_cast<Fn>(&gloo::max<float>) : static_cast<Fn>(&gloo::sum<float>);
  return RunAllreduce(context_, data, count, fn, NextTag(), options_.timeout);
}

Status GlooProcessGroup::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  if (wire == WireType::kFp32) return AllReduce(data, count, op);
  if (count == 0 || options_.size == 1) {
    RoundToWire(wire, data, count);  // the sum of one contribution
    return OkStatus();
  }
  if (aborted_) return AbortedError("the process group was aborted");
  wire_buffer_.resize(count);
  NarrowToWire(wire, data, wire_buffer_.data(), count);
  // Gloo may pass the output as an input (c == a): the loops allow it.
  auto fn = [wire, op](void* c, const void* a, const void* b, size_t n) {
    auto* out = static_cast<uint16_t*>(c);
    const auto* x = static_cast<const uint16_t*>(a);
    const auto* y = static_cast<const uint16_t*>(b);
    if (op == ReduceOp::kMax) {
      MaxOnWire(wire, out, x, y, n);
    } else {
      SumOnWire(wire, out, x, y, n);
    }
  };
  MIRRORED_RETURN_IF_ERROR(RunAllreduce(context_, wire_buffer_.data(), count, fn, NextTag(), options_.timeout));
  WidenFromWire(wire, wire_buffer_.data(), data, count);
  return OkStatus();
}

Status GlooProcessGroup::Broadcast(float* data, size_t count, int root_process) {
  if (count == 0 || options_.size == 1) return OkStatus();
  if (aborted_) return AbortedError("the process group was aborted");
  try {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data, count);
    opts.setRoot(root_process);
    opts.setTag(NextTag());
    opts.setTimeout(options_.timeout);
    gloo::broadcast(opts);
    return OkStatus();
  } catch (const std::exception& e) {
    return FromGloo(e, "broadcast");
  }
}

Status GlooProcessGroup::Barrier() {
  if (options_.size == 1) return OkStatus();
  if (aborted_) return AbortedError("the process group was aborted");
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTag(NextTag());
    opts.setTimeout(options_.timeout);
    gloo::barrier(opts);
    return OkStatus();
  } catch (const std::exception& e) {
    return FromGloo(e, "barrier");
  }
}

}  // namespace mirrored
