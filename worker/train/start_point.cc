#include "worker/train/start_point.h"

#include <vector>

#include "common/logging.h"
#include "worker/checkpoint/model_checkpoint.h"

namespace mirrored {
namespace {

// Integers travel through float collectives exactly as two 24-bit halves.
void PutInt(std::vector<float>& v, int64_t x) {
  v.push_back(static_cast<float>(x >> 24));
  v.push_back(static_cast<float>(x & 0xffffff));
}
int64_t GetInt(const std::vector<float>& v, size_t i) {
  return (static_cast<int64_t>(v[i]) << 24) + static_cast<int64_t>(v[i + 1]);
}

// 1 (resuming), step, epoch, step in epoch, iterations (two floats each),
// validate first, loss scale, its good steps (two).
constexpr size_t kHeaderFloats = 13;

}  // namespace

Status BroadcastStart(const std::optional<LoadedCheckpoint>& resume, bool validate_first, uint64_t global_batch,
                      model::Model& model, model::Optimizer& optimizer, ReplicaContext& replica, StartPoint* start) {
  Communicator& comm = replica.communicator();
  auto& store = model.store();
  std::vector<float> header;
  if (replica.global_rank() == 0 && resume) {
    MIRRORED_RETURN_IF_ERROR(RestoreModel(*resume, model, &optimizer));
    const CheckpointState& st = resume->info.state;
    int64_t step_in_epoch = st.step_in_epoch;
    if (st.global_batch_size > 0 && static_cast<uint64_t>(st.global_batch_size) != global_batch) {
      // Another replica count: keep the examples consumed, in new batches.
      step_in_epoch = st.step_in_epoch * st.global_batch_size / static_cast<int64_t>(global_batch);
      MIRRORED_LOG(WARNING) << "checkpoint " << resume->info.dir << " was written with global batch "
                            << st.global_batch_size << ", this job uses " << global_batch
                            << ": resuming epoch " << st.epoch + 1 << " at batch " << step_in_epoch;
    }
    header = {1.0f};
    PutInt(header, st.step);
    PutInt(header, st.epoch);
    PutInt(header, step_in_epoch);
    PutInt(header, optimizer.iterations());
    header.push_back(validate_first ? 1.0f : 0.0f);
    header.push_back(static_cast<float>(st.loss_scale));  // a float: exact for the powers of two it holds
    PutInt(header, st.loss_scale_good_steps);
  } else {
    header.assign(kHeaderFloats, 0.0f);
  }
  MIRRORED_RETURN_IF_ERROR(comm.BroadcastHost(header.data(), header.size(), 0));
  // Identical starting point everywhere: rank 0's weights, statistics and
  // slots. The backend's pending writes to them (the slots' zero fill on a
  // GPU stream) land first: the communicator works on its own stream.
  model.backend().Synchronize();
  MIRRORED_RETURN_IF_ERROR(comm.Broadcast(store.params_data(), store.params_size(), 0));
  if (store.state_size() > 0) MIRRORED_RETURN_IF_ERROR(comm.Broadcast(store.state_data(), store.state_size(), 0));
  if (header[0] == 1.0f) {
    for (size_t i = 0; i < optimizer.slot_names().size(); ++i) {
      MIRRORED_RETURN_IF_ERROR(comm.Broadcast(optimizer.slot_data(i), store.params_size(), 0));
    }
    start->step = GetInt(header, 1);
    start->position = {static_cast<uint64_t>(GetInt(header, 3)), static_cast<uint64_t>(GetInt(header, 5))};
    start->iterations = GetInt(header, 7);
    start->validate_first = header[9] == 1.0f;
    start->loss_scale = header[10];
    start->loss_scale_good_steps = GetInt(header, 11);
    optimizer.set_iterations(start->iterations);
  }
  return OkStatus();
}

}  // namespace mirrored
