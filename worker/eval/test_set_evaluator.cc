#include "worker/eval/test_set_evaluator.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common/logging.h"
#include "worker/checkpoint/checkpoint_data_shape.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/cuda_check.h"
#include "worker/model/model_choice.h"
#include "worker/strategy/device_choice.h"
#include "worker/checkpoint/model_checkpoint.h"

namespace mirrored {
namespace {

// Loss and accuracy (mse under --loss mse) of `model` on the whole of `test`.
TestSetEvaluator::Result EvaluateOn(model::Model& model, const data::Dataset& test) {
  constexpr size_t kBatch = 500;
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<float> targets;
  std::vector<uint32_t> idx;
  double loss_sum = 0, correct = 0;
  for (size_t begin = 0; begin < test.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, test.size() - begin);
    idx.resize(n);
    for (size_t i = 0; i < n; ++i) idx[i] = static_cast<uint32_t>(begin + i);
    images.resize(n * test.example_size());
    labels.resize(n);
    test.Gather(idx, images.data(), labels.data());
    if (test.has_targets()) {
      targets.resize(n * size_t(test.target_width()));
      test.GatherTargets(idx, targets.data());
    }
    model.Forward(static_cast<int>(n), images.data(), labels.data(), test.has_targets() ? targets.data() : nullptr,
                  /*training=*/false);
    for (float l : model.losses()) loss_sum += l;
    correct += model.MetricSum();  // mse: squared errors
  }
  return {loss_sum / static_cast<double>(test.size()), correct / static_cast<double>(test.size())};
}

}  // namespace

StatusOr<std::unique_ptr<TestSetEvaluator>> TestSetEvaluator::Create(const EvaluatorOptions& options,
                                                                     data::TrainingData data) {
  // --device: the evaluator runs one model copy, on the first visible GPU
  // (auto, when there is one; a local job's launcher hides the workers'
  // GPUs from it) or on the CPU.
  MIRRORED_ASSIGN_OR_RETURN(DeviceKind kind, ParseDeviceKind(options.device));
  const GpuProbe probe = kind == DeviceKind::kCpu ? GpuProbe{} : ProbeGpus();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (kind == DeviceKind::kGpu && probe.count == 0 && visible != nullptr && *visible == '\0') {
    // mirrored-launch local gives the GPUs to the workers and hides them
    // from its evaluator (unless --evaluator-gpus), whose arguments are the
    // workers' (--device gpu).
    MIRRORED_LOG(WARNING) << "--device gpu, but CUDA_VISIBLE_DEVICES is empty (the launcher gave the GPUs to the "
                             "workers; `mirrored-launch local --evaluator-gpus 1` gives it one): evaluating on "
                             "the CPU";
    kind = DeviceKind::kCpu;
  }
  MIRRORED_ASSIGN_OR_RETURN(ReplicaDevices devices, ResolveReplicaDevices(kind, 1, probe));
  const int gpu = devices.gpu ? devices.gpus.front() : -1;
  if (gpu >= 0) MIRRORED_RETURN_IF_ERROR(BindThreadToGpu(gpu));
  MIRRORED_LOG(INFO) << "evaluating on " << (gpu >= 0 ? "GPU " + std::to_string(gpu) : std::string("the CPU"));
  return std::unique_ptr<TestSetEvaluator>(new TestSetEvaluator(options, std::move(data), gpu));
}

Status TestSetEvaluator::CheckLoss(const LoadedCheckpoint& checkpoint) const {
  const std::string trained = checkpoint.info.state.loss.empty() ? "sparse_categorical_crossentropy"
                                                                 : checkpoint.info.state.loss;
  const std::string given = data_.shape().regression ? "mse" : "sparse_categorical_crossentropy";
  if (trained == given) return OkStatus();
  return InvalidArgumentError(checkpoint.info.dir + " was trained with --loss " + trained + ", but this evaluator " +
                              "reads --data " + data_dir_ + " for --loss " + given + ": give it --loss " + trained);
}

StatusOr<std::unique_ptr<model::Backend>> TestSetEvaluator::MakeBackend() const {
  if (gpu_ >= 0) return model::MakeGpuBackend(gpu_);
  return model::MakeCpuBackend();
}

StatusOr<TestSetEvaluator::Result> TestSetEvaluator::Evaluate(const LoadedCheckpoint& checkpoint) {
  const CheckpointState& st = checkpoint.info.state;
  try {  // the GPU backend's kernels throw CudaError
    if (model_option_ && st.model != *model_option_ && !said_model_) {
      said_model_ = true;
      MIRRORED_LOG(WARNING) << "--model " << *model_option_ << " ignored: ckpt-" << checkpoint.info.step
                            << " holds model " << st.model << " (its state.json), which is what is evaluated";
    }
    const data::ImageSetShape& s = data_.shape();
    MIRRORED_RETURN_IF_ERROR(
        CheckpointFitsData(checkpoint.info, {s.height, s.width, s.channels}, s.classes, "--data " + data_dir_));
    MIRRORED_RETURN_IF_ERROR(CheckLoss(checkpoint));
    if (!model_ || model_->name() != st.model || model_json_ != st.model_json) {
      MIRRORED_ASSIGN_OR_RETURN(auto backend, MakeBackend());
      MIRRORED_ASSIGN_OR_RETURN(model::ModelChoice choice,
                                model::ModelChoice::FromRecorded(st.model, st.model_json, checkpoint.info.dir +
                                                                                              "/state.json"));
      // Built for --data's images and classes: a checkpoint of other
      // shapes does not fit it (RestoreModel names the tensor).
      MIRRORED_ASSIGN_OR_RETURN(model_, choice.Create(std::move(backend), 0, {s.height, s.width, s.channels}, s.classes));
      model_json_ = st.model_json;
    }
    model_->set_loss(data_.shape().regression ? model::Loss::kMeanSquaredError
                                              : model::Loss::kSparseCategoricalCrossentropy);
    MIRRORED_RETURN_IF_ERROR(RestoreModel(checkpoint, *model_, nullptr));
    return EvaluateOn(*model_, data_.test());
  } catch (const model::CudaError& e) {
    return InternalError("evaluating ckpt-" + std::to_string(checkpoint.info.step) + " on GPU " +
                         std::to_string(gpu_) + ": " + e.what());
  }
}

}  // namespace mirrored
