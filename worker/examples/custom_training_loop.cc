// A custom training step on mirrored's library API, the C++ counterpart of
// the tutorials' tf.distribute custom loop. Alone it trains on all local CPU
// replicas; under mirrored-launch it is one task of the job (TF_CONFIG), and
// flags it does not know (the launcher's --run-dir) are ignored.
//   custom_training_loop [--cpu-replicas N] [--steps N] [--device auto|cpu|gpu]
#include <CLI/CLI.hpp>
#include <mirrored/mirrored.h>
#include <cstdio>

using namespace mirrored;
constexpr auto kNextBatchTimeout = std::chrono::seconds(60);  // a replica's wait for its input slice

int Fail(const Status& s) {  // prints the error; the exit code DESIGN.md gives it
  return std::fprintf(stderr, "custom_training_loop: %s\n", s.ToString().c_str()), ExitCodeFor(s);
}

// One replica's loop: its own model copy (on its own device), optimizer and input shard.
Status TrainReplica(ReplicaContext& replica, const data::Dataset& train, const data::BatchSampler& sampler,
                    int steps) {
  const int world = replica.num_replicas_in_sync();
  const uint64_t global_batch = sampler.global_batch(), per_replica = global_batch / world;
  MIRRORED_ASSIGN_OR_RETURN(auto backend, replica.MakeBackend());
  MIRRORED_ASSIGN_OR_RETURN(auto model, model::Model::Create("mlp", std::move(backend), /*seed=*/1));
  MIRRORED_ASSIGN_OR_RETURN(auto adam, model::Optimizer::Create("adam", 1e-3f));
  auto& store = model->store();
  adam->Bind(&store, &model->backend());
  Communicator& comm = replica.communicator();
  MIRRORED_RETURN_IF_ERROR(comm.Broadcast(store.params_data(), store.params_size(), 0));
  data::BatchPrefetcher input(&train, sampler, replica.global_rank(), world, {0, 0});
  std::vector<float> scale(per_replica, 1.0f / global_batch);  // losses scaled by the GLOBAL batch

  for (int step = 1; step <= steps; ++step) {
    MIRRORED_ASSIGN_OR_RETURN(data::Batch batch, input.Next(kNextBatchTimeout));
    model->Forward(batch.size, batch.images.data(), batch.labels.data(), /*training=*/true);
    model->Backward(scale.data(), nullptr);
    model->backend().Synchronize();  // a GPU backend's kernels finish before the communicator reads
    // SUM of the gradients: the one-device update on the global batch.
    MIRRORED_RETURN_IF_ERROR(comm.AllReduce(store.grads_data(), store.params_size(), ReduceOp::kSum));
    adam->Apply();
    if (step % 50 != 0) continue;
    float loss = 0;  // metrics: SUM of counts across replicas, then divide
    for (float l : model->losses()) loss += l;
    std::vector<float> m = {loss, static_cast<float>(model->CorrectCount()), static_cast<float>(batch.size)};
    MIRRORED_RETURN_IF_ERROR(replica.SumAcrossReplicas(m));
    if (replica.is_chief()) std::printf("step %d loss %.4f accuracy %.4f\n", step, m[0] / m[2], m[1] / m[2]);
  }
  return OkStatus();
}

int main(int argc, char** argv) {
  CLI::App app{"A custom training step on mirrored's library API"};
  int replicas = 2, steps = 200;
  std::string device = "cpu";
  app.add_option("--cpu-replicas", replicas, "CPU replicas")->type_name("N")->check(CLI::Range(1, 4096));
  app.add_option("--steps", steps, "training steps")->type_name("N")->check(CLI::Range(1, 1000000));
  app.add_option("--device", device, "auto|cpu|gpu")->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  app.allow_extras()->set_version_flag("--version", kVersion);  // extras: the launcher's --run-dir
  try { app.parse(argc, argv); } catch (const CLI::ParseError& e) { return app.exit(e) == 0 ? 0 : 2; }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line reaches the launcher as printed

  auto config = ResolveTfConfig(std::nullopt);  // TF_CONFIG, or one local task
  if (!config.ok()) return Fail(config.status());
  if (config->IsEvaluator()) return Fail(InvalidArgumentError("this example has no evaluator role"));
  auto data = data::FashionMnist::Load(data::FashionMnist::kDefaultDir);
  if (!data.ok()) return Fail(data.status());
  StrategyOptions options = StrategyOptions::FromEnvironment();  // the launcher's job token, restarts
  options.device = *ParseDeviceKind(device);
  options.cpu_replicas = replicas;
  auto strategy = MirroredStrategy::Create(*config, options);
  if (!strategy.ok()) return Fail(strategy.status());
  // Tasks started with other step counts would not meet in the same collectives.
  if (Status same = (*strategy)->CheckTasksAgree({{"--steps", std::to_string(steps)}}); !same.ok()) return Fail(same);
  const uint64_t global_batch = 32 * (*strategy)->num_replicas_in_sync();  // 32 per replica
  data::BatchSampler sampler(data->train().size(), global_batch, /*seed=*/1, /*drop_remainder=*/true);
  Status status = (*strategy)->RunReplicas(
      [&](ReplicaContext& replica) { return TrainReplica(replica, data->train(), sampler, steps); });
  if (!status.ok()) return (*strategy)->ReportError(status), Fail(status);  // the others name this error
  Status done = (*strategy)->Shutdown();  // the exit barrier: the chief's service outlives the others
  return done.ok() ? 0 : Fail(done);
}
