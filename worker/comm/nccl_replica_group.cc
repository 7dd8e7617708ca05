#include "worker/comm/nccl_replica_group.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "worker/comm/cuda_device_guard.h"
#include "worker/comm/nccl_check.h"

namespace mirrored {
namespace {

constexpr size_t kUniqueIdBytes = sizeof(ncclUniqueId);
static_assert(kUniqueIdBytes == 128, "ncclUniqueId size changed");

// Per local replica, before it becomes an NcclCommunicator.
struct Pending {
  int device = 0;
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;
  ncclComm_t comm = nullptr;
};

// Nothing was ever enqueued on these streams: no drain needed.
void Release(std::vector<Pending>& pending) {
  for (Pending& p : pending) {
    CudaDeviceGuard on(p.device);
    if (p.comm != nullptr) ncclCommAbort(p.comm);
    if (p.scratch != nullptr) cudaFree(p.scratch);
    if (p.stream != nullptr) cudaStreamDestroy(p.stream);
    p = Pending{};
  }
}

Status ValidateOptions(const NcclReplicaGroupOptions& o) {
  if (o.unique_id.size() != kUniqueIdBytes) {
    return InvalidArgumentError("NCCL unique id has " + std::to_string(o.unique_id.size()) + " bytes, expected " +
                                std::to_string(kUniqueIdBytes));
  }
  if (o.devices.empty()) return InvalidArgumentError("NCCL replica group: no local devices");
  if (o.world_size < 1 || o.rank_offset < 0 ||
      o.rank_offset + static_cast<int>(o.devices.size()) > o.world_size) {
    return InvalidArgumentError("NCCL replica group: ranks " + std::to_string(o.rank_offset) + ".." +
                                std::to_string(o.rank_offset + static_cast<int>(o.devices.size()) - 1) +
                                " do not fit in world size " + std::to_string(o.world_size));
  }
  if (std::set<int>(o.devices.begin(), o.devices.end()).size() != o.devices.size()) {
    // NCCL refuses two ranks of one communicator on one GPU of one host.
    return InvalidArgumentError("NCCL replica group: a GPU is listed twice in the local devices");
  }
  int count = 0;
  MIRRORED_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int d : o.devices) {
    if (d < 0 || d >= count) {
      return InvalidArgumentError("NCCL replica group: GPU " + std::to_string(d) + " does not exist (" +
                                  std::to_string(count) + " visible; check CUDA_VISIBLE_DEVICES)");
    }
  }
  return OkStatus();
}

// Non-blocking init: ncclGroupEnd may return before the ranks have met; each
// communicator's async error stays ncclInProgress until its init settles.
Status WaitForInit(std::vector<Pending>& pending, const NcclReplicaGroupOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + o.init_timeout;
  auto pause = std::chrono::microseconds(50);
  for (Pending& p : pending) {
    for (;;) {
      ncclResult_t async = ncclInProgress;
      MIRRORED_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(p.comm, &async));
      if (async == ncclSuccess) break;
      if (async != ncclInProgress) {
        Status s = NcclCallStatus(async, "ncclCommInitRankConfig (asynchronous)", __FILE__, __LINE__);
        return s.WithContext(std::string("NCCL init on GPU ") + std::to_string(p.device) + ": " +
                             ncclGetLastError(p.comm));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return DeadlineExceededError(
            "NCCL init: not every one of the " + std::to_string(o.world_size) + " ranks joined within " +
            std::to_string(o.init_timeout.count()) +
            " ms (check that every task started its GPU replicas and that NCCL_SOCKET_IFNAME names a "
            "reachable interface)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
  }
  return OkStatus();
}

Status InitAll(std::vector<Pending>& pending, const NcclReplicaGroupOptions& o) {
  for (Pending& p : pending) {
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaSetDevice(p.device));
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&p.scratch), sizeof(float)));
    // The barrier all-reduces it: a defined value, never a NaN from garbage.
    MIRRORED_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.scratch, 0, sizeof(float), p.stream));  // ordered before NCCL's use
  }
  ncclUniqueId id;
  std::memcpy(id.internal, o.unique_id.data(), kUniqueIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // Local replicas join in one group: a blocking per-GPU init from one thread
  // would wait for the next local rank forever.
  MIRRORED_NCCL_RETURN_IF_ERROR(ncclGroupStart());
  Status first;
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    Status s = CudaCallStatus(cudaSetDevice(p.device), "cudaSetDevice(device)", __FILE__, __LINE__);
    if (s.ok()) {
      const int rank = o.rank_offset + static_cast<int>(i);
      s = NcclCallStatus(ncclCommInitRankConfig(&p.comm, o.world_size, id, rank, &config),
                         "ncclCommInitRankConfig(&comm, world_size, id, rank, &config)", __FILE__, __LINE__);
    }
    if (!s.ok() && first.ok()) first = s;
  }
  // The group must be closed even when a call inside it failed.
  Status end = NcclCallStatus(ncclGroupEnd(), "ncclGroupEnd()", __FILE__, __LINE__);
  MIRRORED_RETURN_IF_ERROR(first);
  MIRRORED_RETURN_IF_ERROR(end);
  for (const Pending& p : pending) {
    if (p.comm == nullptr) return InternalError("ncclCommInitRankConfig returned no communicator");
  }
  return WaitForInit(pending, o);
}

}  // namespace

StatusOr<std::unique_ptr<NcclReplicaGroup>> NcclReplicaGroup::Create(NcclReplicaGroupOptions options) {
  MIRRORED_RETURN_IF_ERROR(ValidateOptions(options));
  // InitAll walks every local GPU: the caller's thread ends on its own again.
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) current = options.devices.front();
  CudaDeviceGuard restore(current);
  std::vector<Pending> pending(options.devices.size());
  for (size_t i = 0; i < pending.size(); ++i) pending[i].device = options.devices[i];
  Status s = InitAll(pending, options);
  if (!s.ok()) {
    Release(pending);
    return s.WithContext("NCCL replica group (ranks " + std::to_string(options.rank_offset) + ".." +
                         std::to_string(options.rank_offset + static_cast<int>(pending.size()) - 1) + " of " +
                         std::to_string(options.world_size) + ")");
  }
  auto abort_state = std::make_shared<NcclAbortState>();
  std::unique_ptr<NcclReplicaGroup> group(new NcclReplicaGroup(std::move(options), abort_state));
  NcclReplicaGroup* raw = group.get();
  for (size_t i = 0; i < pending.size(); ++i) {
    const Pending& p = pending[i];
    group->communicators_.push_back(std::make_unique<NcclCommunicator>(
        group->options_.rank_offset + static_cast<int>(i), group->options_.world_size, p.device, p.comm, p.stream,
        p.scratch, group->options_.timeout, abort_state, [raw](const Status& reason) { raw->Abort(reason); }));
  }
  return group;
}

NcclReplicaGroup::NcclReplicaGroup(NcclReplicaGroupOptions options, std::shared_ptr<NcclAbortState> abort_state)
    : options_(std::move(options)), abort_state_(std::move(abort_state)) {}

NcclReplicaGroup::~NcclReplicaGroup() {
  if (!abort_state_->aborted.load()) {
    // ncclCommFinalize flushes outstanding work and is matched across the
    // local communicators, hence one group; non-blocking, so wait with a
    // deadline and fall back to abort (a peer may already be gone).
    const bool grouped = ncclGroupStart() == ncclSuccess;
    bool finalized = grouped;
    for (auto& c : communicators_) {
      if (!finalized) break;
      CudaDeviceGuard on(c->device());
      const ncclResult_t rc = ncclCommFinalize(c->comm_for_group());
      finalized = rc == ncclSuccess || rc == ncclInProgress;
    }
    if (grouped) {  // a started group is always closed
      const ncclResult_t end = ncclGroupEnd();
      finalized = finalized && (end == ncclSuccess || end == ncclInProgress);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::min(options_.timeout, std::chrono::milliseconds(30000));
    for (auto& c : communicators_) {
      while (finalized) {
        const ncclResult_t async = c->AsyncError();
        if (async == ncclSuccess) break;
        if (async != ncclInProgress || std::chrono::steady_clock::now() >= deadline) finalized = false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (finalized) {
      for (auto& c : communicators_) c->ReleaseNccl();
    }
  }
  // Whatever was not released is aborted by each communicator's destructor.
  communicators_.clear();
}

void NcclReplicaGroup::Abort(const Status& reason) {
  {
    std::lock_guard lock(abort_state_->mu);
    if (abort_state_->reason.ok()) {
      abort_state_->reason = reason.code() == StatusCode::kAborted ? reason : AbortedError(reason.message());
    }
  }
  abort_state_->aborted.store(true);
  for (auto& c : communicators_) c->AbortNccl();
}

}  // namespace mirrored
