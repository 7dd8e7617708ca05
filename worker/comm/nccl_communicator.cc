#include "worker/comm/nccl_communicator.h"

#include <algorithm>
#include <sstream>
#include <thread>

#include "common/logging.h"
#include "worker/comm/cuda_device_guard.h"
#include "worker/comm/gpu_wire_kernels.h"
#include "worker/comm/nccl_check.h"

namespace mirrored {
namespace {

ncclRedOp_t ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

long long MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int world_size, int device, ncclComm_t comm, cudaStream_t stream,
                                   float* scratch, std::chrono::milliseconds timeout,
                                   std::shared_ptr<NcclAbortState> abort_state,
                                   std::function<void(const Status&)> abort_group)
    : rank_(rank),
      world_size_(world_size),
      device_(device),
      timeout_(timeout),
      stream_(stream),
      scratch_(scratch),
      abort_state_(std::move(abort_state)),
      abort_group_(std::move(abort_group)),
      comm_(comm) {}

NcclCommunicator::~NcclCommunicator() {
  AbortNccl();  // no-op when the group already released or aborted it
  CudaDeviceGuard on(device_);
  // After an abort the stream may still hold NCCL kernels on their way out;
  // freeing a buffer they might touch would be worse than leaking it, so
  // drain with a deadline and leak on timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  cudaError_t q = cudaStreamQuery(stream_);
  while (q == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    q = cudaStreamQuery(stream_);
  }
  if (q == cudaErrorNotReady) {
    MIRRORED_LOG(WARNING) << "NCCL rank " << rank_ << " (GPU " << device_
                          << "): its stream did not drain within 10 s of the abort; leaking it and its scratch buffer";
    return;
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (staging_ != nullptr) cudaFree(staging_);
  if (wire_ != nullptr) cudaFree(wire_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCommunicator::AbortNccl() {
  std::lock_guard lock(comm_mu_);
  if (comm_ == nullptr) return;
  CudaDeviceGuard on(device_);  // called from any replica's thread: its device is restored
  ncclCommAbort(comm_);  // its result changes nothing: the handle is gone either way
  comm_ = nullptr;
}

void NcclCommunicator::ReleaseNccl() {
  std::lock_guard lock(comm_mu_);
  if (comm_ == nullptr) return;
  CudaDeviceGuard on(device_);
  ncclCommDestroy(comm_);
  comm_ = nullptr;
}

ncclResult_t NcclCommunicator::AsyncError() {
  std::lock_guard lock(comm_mu_);
  if (comm_ == nullptr) return ncclInvalidUsage;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm_, &async);
  return rc != ncclSuccess ? rc : async;
}

Status NcclCommunicator::AllReduce(float* data, size_t count, ReduceOp op) {
  return Run({Kind::kAllReduce, data, count, op, 0, 0, WireType::kFp32});
}

Status NcclCommunicator::AllReduceAs(WireType wire, float* data, size_t count, ReduceOp op) {
  if (wire == WireType::kFp32 || count == 0) return AllReduce(data, count, op);
  MIRRORED_RETURN_IF_ERROR(ReserveWire(count));
  return Run({Kind::kAllReduce, data, count, op, 0, 0, wire});
}

Status NcclCommunicator::ReserveWire(size_t count) {
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  if (count <= wire_capacity_) return OkStatus();
  // The stream is idle here (every operation waits for it).
  if (wire_ != nullptr) MIRRORED_CUDA_RETURN_IF_ERROR(cudaFree(wire_));
  wire_ = nullptr;
  wire_capacity_ = 0;
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaMalloc(&wire_, count * sizeof(uint16_t)));
  wire_capacity_ = count;
  return OkStatus();
}

Status NcclCommunicator::WidenResult(const Op& op) {
  MIRRORED_CUDA_RETURN_IF_ERROR(WidenOnDevice(stream_, op.wire == WireType::kBf16, wire_, op.data, op.count));
  // A conversion kernel cannot hang: no deadline needed.
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return OkStatus();
}

Status NcclCommunicator::Broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= world_size_) {
    return InvalidArgumentError("broadcast root " + std::to_string(root) + " is out of range: world size " +
                                std::to_string(world_size_));
  }
  return Run({Kind::kBroadcast, data, count, ReduceOp::kSum, root, 0, WireType::kFp32});
}

Status NcclCommunicator::Barrier() { return Run({Kind::kBarrier, scratch_, 1, ReduceOp::kSum, 0, 0, WireType::kFp32}); }

Status NcclCommunicator::StageIn(const float* host, size_t count) {
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  if (count > staging_capacity_) {
    // The stream is idle here (every operation waits for it), so freeing
    // the old buffer cannot race an NCCL kernel.
    const size_t capacity = std::max<size_t>(count, 256);
    if (staging_ != nullptr) MIRRORED_CUDA_RETURN_IF_ERROR(cudaFree(staging_));
    staging_ = nullptr;
    staging_capacity_ = 0;
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&staging_), capacity * sizeof(float)));
    staging_capacity_ = capacity;
  }
  // Ordered before the collective that Run() issues on the same stream.
  MIRRORED_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(staging_, host, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
  return OkStatus();
}

Status NcclCommunicator::StageOut(float* host, size_t count) {
  MIRRORED_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, staging_, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  // The collective has completed (Run waited for it): only the copy is left.
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return OkStatus();
}

Status NcclCommunicator::AllReduceHost(float* data, size_t count, ReduceOp op) {
  if (count == 0) return AllReduce(data, 0, op);
  MIRRORED_RETURN_IF_ERROR(StageIn(data, count));
  MIRRORED_RETURN_IF_ERROR(AllReduce(staging_, count, op));
  return StageOut(data, count);
}

Status NcclCommunicator::BroadcastHost(float* data, size_t count, int root) {
  if (count == 0) return Broadcast(data, 0, root);
  MIRRORED_RETURN_IF_ERROR(StageIn(data, count));
  MIRRORED_RETURN_IF_ERROR(Broadcast(staging_, count, root));
  return StageOut(data, count);
}

Status NcclCommunicator::AbortReason() {
  std::lock_guard lock(abort_state_->mu);
  return abort_state_->reason.ok() ? AbortedError("the NCCL replica group was aborted") : abort_state_->reason;
}

Status NcclCommunicator::Run(Op op) {
  op.seq = ++seq_;
  if (started_) started_->fetch_add(1);
  const auto start = std::chrono::steady_clock::now();
  Status s;
  if (abort_state_->aborted.load()) {
    s = AbortReason();
  } else {
    s = Issue(op);
    if (s.ok()) s = WaitForCompletion(start + timeout_);
    // Not issued with the collective: a non-blocking communicator may put
    // its kernel on the stream only once the wait above saw it settle.
    if (s.ok() && op.wire != WireType::kFp32) s = WidenResult(op);
  }
  if (!s.ok()) {
    // The first failure names the cause for every other replica; later
    // Aborts keep the first reason.
    if (s.code() != StatusCode::kAborted) {
      abort_group_(AbortedError("rank " + std::to_string(rank_) + " failed: " + s.message()));
    }
    return Describe(s, op, start);
  }
  return s;
}

Status NcclCommunicator::Issue(const Op& op) {
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  std::lock_guard lock(comm_mu_);
  if (comm_ == nullptr) return AbortReason();
  // Non-blocking communicator: ncclInProgress means "enqueued, still being
  // set up"; the wait below polls ncclCommGetAsyncError until it settles,
  // which NCCL requires before the next call on this communicator.
  switch (op.kind) {
    case Kind::kAllReduce:
    case Kind::kBarrier:
      if (op.wire != WireType::kFp32) {
        const bool bf16 = op.wire == WireType::kBf16;
        MIRRORED_CUDA_RETURN_IF_ERROR(NarrowOnDevice(stream_, bf16, op.data, wire_, op.count));
        MIRRORED_NCCL_RETURN_IF_ERROR(ncclAllReduce(wire_, wire_, op.count, bf16 ? ncclBfloat16 : ncclFloat16,
                                                    ToNccl(op.op), comm_, stream_));
        break;
      }
      MIRRORED_NCCL_RETURN_IF_ERROR(
          ncclAllReduce(op.data, op.data, op.count, ncclFloat32, ToNccl(op.op), comm_, stream_));
      break;
    case Kind::kBroadcast:
      MIRRORED_NCCL_RETURN_IF_ERROR(ncclBroadcast(op.data, op.data, op.count, ncclFloat32, op.root, comm_, stream_));
      break;
  }
  return OkStatus();
}

Status NcclCommunicator::WaitForCompletion(std::chrono::steady_clock::time_point deadline) {
  // Poll: yielding for the first 200 us (small collectives finish in
  // microseconds, and a sleep lasts at least ~50 us of timer slack), then
  // with a pause that grows to 200 us, so that a long or hung one neither
  // burns a CPU core for the whole timeout nor is seen more than 200 us late
  // (a step on a GPU can take about a millisecond).
  constexpr auto kSpin = std::chrono::microseconds(200);
  constexpr auto kMaxPause = std::chrono::microseconds(200);
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (abort_state_->aborted.load()) return AbortReason();
    const ncclResult_t async = AsyncError();
    if (async == ncclInvalidUsage && abort_state_->aborted.load()) return AbortReason();
    if (async != ncclSuccess && async != ncclInProgress) {
      std::string detail;
      {
        std::lock_guard lock(comm_mu_);
        if (comm_ != nullptr) detail = ncclGetLastError(comm_);
      }
      return UnavailableError(std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async) +
                              (detail.empty() ? "" : " (" + detail + ")") +
                              "; a peer task probably failed or its network link broke");
    }
    if (async == ncclSuccess) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return OkStatus();
      if (q != cudaErrorNotReady) {
        return InternalError(std::string("cudaStreamQuery(stream) failed on GPU ") + std::to_string(device_) +
                             ": " + cudaGetErrorString(q));
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceededError("not complete within the " + std::to_string(timeout_.count()) +
                                   " ms collective timeout: a peer replica did not join it or is stuck "
                                   "(check the other tasks' logs)");
    }
    if (std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::duration_cast<std::chrono::microseconds>(kMaxPause));
  }
}

Status NcclCommunicator::Describe(const Status& s, const Op& op, std::chrono::steady_clock::time_point start) const {
  static constexpr const char* kNames[] = {"all-reduce", "broadcast", "barrier"};
  std::ostringstream what;
  what << "NCCL " << kNames[static_cast<int>(op.kind)] << " #" << op.seq;
  if (op.kind == Kind::kAllReduce) {
    what << " (" << ReduceOpName(op.op) << ", " << op.count << " floats";
    if (op.wire != WireType::kFp32) what << " as " << WireTypeName(op.wire);
    what << ")";
  }
  if (op.kind == Kind::kBroadcast) what << " (root " << op.root << ", " << op.count << " floats)";
  what << " on rank " << rank_ << " of " << world_size_ << " (GPU " << device_ << ") failed after "
       << MillisSince(start) << " ms";
  return s.WithContext(what.str());
}

}  // namespace mirrored
