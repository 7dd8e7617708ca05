// The GradientFence of a GPU replica: orders each gradient bucket's NCCL
// all-reduce after the backward kernels that wrote it, on the device, with
// one CUDA event per bucket. Mark(b) records event b on the backend's
// compute stream (after every kernel backward has issued so far); Wait(b)
// makes the communicator's NCCL stream wait for it (cudaStreamWaitEvent), so
// the all-reduce starts as soon as its gradients exist while backward keeps
// issuing kernels on the compute stream: no host round trip, and compute
// and communication overlap on the GPU. (Issuing NCCL on the compute stream
// would be correct too, but would serialise every bucket behind the rest of
// backward.) The compute stream never waits for the NCCL stream: the
// optimizer's kernels are issued only after GradientBucketer::Finish(), by
// which time every all-reduce has completed (NcclCommunicator waits).
//
//   MIRRORED_ASSIGN_OR_RETURN(auto fence, MakeCudaEventFence(model->backend(), comm, buckets));
//   GradientBucketer b(spans, grads, &comm, {.fence = fence.get()});
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"
#include "worker/comm/communicator.h"
#include "worker/model/backend.h"
#include "worker/train/gradient_bucketer.h"

namespace mirrored {

// `compute` must be a GPU backend and `comm` an NCCL communicator on the
// same device (InvalidArgument otherwise); call it on the replica's thread
// (bound to that device). Internal when an event cannot be created;
// FailedPrecondition in a build without CUDA.
StatusOr<std::unique_ptr<GradientFence>> MakeCudaEventFence(model::Backend& compute, Communicator& comm,
                                                            size_t buckets);

}  // namespace mirrored
