// A custom training step on mirrored's library API, the C++ counterpart of
// the tutorials' tf.distribute custom loop. Run it alone (all local CPU
// replicas) or as a task of a job (TF_CONFIG from mirrored-launch, which may
// pass --cpu-replicas and --run-dir; other flags are ignored):
//   custom_training_loop [--cpu-replicas N] [--steps N] [--device auto|cpu|gpu]
// GPU replicas are one per visible GPU.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/cluster/tf_config_parser.h"
#include "mirrored/config.h"
#include "worker/data/batch_prefetcher.h"
#include "worker/data/fashion_mnist.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"
#include "worker/train/mirrored_strategy.h"

using namespace mirrored;

int Fail(const Status& s) {
  std::fprintf(stderr, "custom_training_loop: %s\n", s.ToString().c_str());
  return ExitCodeFor(s);
}

struct Flags {
  int replicas = 2;
  int steps = 200;
  std::string device = "cpu";
};

// Reads the flags into `flags`; an exit code when the program ends here
// (--help, or a bad number).
std::optional<int> ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    if (const size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);  // --steps=5
      flag.resize(eq);
    }
    if (flag == "--help" || flag == "--version") {
      std::printf("custom_training_loop %s: [--cpu-replicas N] [--steps N] [--device auto|cpu|gpu]\n", kVersion);
      return 0;
    }
    int* number = flag == "--cpu-replicas" || flag == "--replicas" ? &flags.replicas
                  : flag == "--steps"                              ? &flags.steps
                                                                   : nullptr;
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (number != nullptr && (value.empty() || *end != '\0' || n < 1 || n > 1000000)) {
      return Fail(InvalidArgumentError(flag + " \"" + value + "\": expected a positive integer"));
    }
    if (number != nullptr) *number = static_cast<int>(n);
    if (flag == "--device") flags.device = value;
  }
  return std::nullopt;
}

int main(int argc, char** argv) {
  Flags flags;
  if (std::optional<int> code = ParseFlags(argc, argv, flags)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each progress line reaches the launcher as printed
  const uint64_t batch_per_replica = 32;
  // How long a replica waits for its next input slice.
  constexpr std::chrono::seconds kNextBatchTimeout{60};

  auto config = ResolveTfConfig(std::nullopt);         // TF_CONFIG, or one local task
  if (!config.ok()) return Fail(config.status());
  if (config->IsEvaluator()) return Fail(InvalidArgumentError("this example trains only: it has no evaluator role"));
  auto data = data::FashionMnist::Load(data::FashionMnist::kDefaultDir);
  if (!data.ok()) return Fail(data.status());
  StrategyOptions options = StrategyOptions::FromEnvironment();  // the launcher's job token, restarts
  auto kind = ParseDeviceKind(flags.device);
  if (!kind.ok()) return Fail(kind.status());
  options.device = *kind;
  options.cpu_replicas = flags.replicas;
  auto strategy = MirroredStrategy::Create(*config, options);
  if (!strategy.ok()) return Fail(strategy.status());
  // Tasks started with other step counts would not meet in the same collectives.
  if (Status same = (*strategy)->CheckTasksAgree({{"--steps", std::to_string(flags.steps)}}); !same.ok()) return Fail(same);

  const int world = (*strategy)->num_replicas_in_sync();
  const uint64_t global_batch = batch_per_replica * world;   // GLOBAL_BATCH_SIZE
  data::BatchSampler sampler(data->train().size(), global_batch, /*seed=*/1, /*drop_remainder=*/true);

  Status status = (*strategy)->RunReplicas([&](ReplicaContext& replica) -> Status {
    // Each replica: its own model copy (on its own device), optimizer and input shard.
    MIRRORED_ASSIGN_OR_RETURN(auto backend, replica.MakeBackend());
    MIRRORED_ASSIGN_OR_RETURN(auto model, model::Model::Create("mlp", std::move(backend), /*seed=*/1));
    MIRRORED_ASSIGN_OR_RETURN(auto adam, model::Optimizer::Create("adam", 1e-3f));
    adam->Bind(&model->store(), &model->backend());
    auto& store = model->store();
    Communicator& comm = replica.communicator();
    MIRRORED_RETURN_IF_ERROR(comm.Broadcast(store.params_data(), store.params_size(), 0));
    data::BatchPrefetcher input(&data->train(), sampler, replica.global_rank(), world, {0, 0});
    // compute_loss: per-example losses scaled by the GLOBAL batch size.
    std::vector<float> scale(batch_per_replica, 1.0f / global_batch);

    for (int step = 1; step <= flags.steps; ++step) {
      MIRRORED_ASSIGN_OR_RETURN(data::Batch batch, input.Next(kNextBatchTimeout));
      model->Forward(batch.size, batch.images.data(), batch.labels.data(), /*training=*/true);
      model->Backward(scale.data(), nullptr);
      // A GPU backend only issued the kernels: let them finish before the
      // communicator (its own stream) reads the gradients. No-op on the CPU.
      model->backend().Synchronize();
      // All-reduce the gradients with SUM: the one-device update on the global batch.
      MIRRORED_RETURN_IF_ERROR(comm.AllReduce(store.grads_data(), store.params_size(), ReduceOp::kSum));
      adam->Apply();

      if (step % 50 == 0) {  // metrics: SUM of counts across replicas, then divide
        float loss = 0;
        for (float l : model->losses()) loss += l;
        std::vector<float> m = {loss, static_cast<float>(model->CorrectCount()), static_cast<float>(batch.size)};
        MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(m));
        if (replica.is_chief()) std::printf("step %d loss %.4f accuracy %.4f\n", step, m[0] / m[2], m[1] / m[2]);
      }
    }
    return OkStatus();
  });
  if (!status.ok()) {
    (*strategy)->ReportError(status);  // the other tasks name this error, not a lost connection
    return Fail(status);
  }
  // The exit barrier: the chief's coordination service outlives the others.
  if (Status done = (*strategy)->Shutdown(); !done.ok()) return Fail(done);
  return 0;
}
