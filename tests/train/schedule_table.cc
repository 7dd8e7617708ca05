// Prints the learning rate mirrored-worker's flags give each optimizer step,
// for run_schedule_interop.sh to compare with Keras' and PyTorch's own
// schedules.
//
//   schedule_table STEPS_PER_EPOCH TOTAL_STEPS REPLICAS LAST_STEP -- --lr-schedule cosine --lr 0.1 ...
//   0 0
//   1 0.0100000000000000002
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "worker/role_options.h"
#include "worker/train/learning_rate_schedule.h"

int main(int argc, char** argv) {
  using namespace mirrored;
  if (argc < 6 || std::string(argv[5]) != "--") {
    std::fprintf(stderr, "usage: %s STEPS_PER_EPOCH TOTAL_STEPS REPLICAS LAST_STEP -- WORKER_FLAGS...\n", argv[0]);
    return 2;
  }
  const RunLength run{.replicas = std::stoi(argv[3]),
                      .steps_per_epoch = std::stoll(argv[1]),
                      .total_steps = std::stoll(argv[2])};
  const int64_t last_step = std::stoll(argv[4]);
  WorkerOptions options;
  CLI::App app;
  options.Register(app);
  std::vector<const char*> flags = {argv[0]};
  for (int i = 6; i < argc; ++i) flags.push_back(argv[i]);
  try {
    app.parse(static_cast<int>(flags.size()), flags.data());
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  Status valid = options.Validate();
  const TrainerOptions trainer = TrainerOptionsFrom(options);
  auto schedule = valid.ok()
                      ? LearningRateSchedule::ForRun(trainer.schedule, trainer.optimizer.EffectiveLearningRate(), run)
                      : StatusOr<LearningRateSchedule>(valid);
  if (!schedule.ok()) {
    std::fprintf(stderr, "%s\n", schedule.status().message().c_str());
    return 2;
  }
  for (int64_t step = 0; step <= last_step; ++step) std::printf("%lld %.17g\n", static_cast<long long>(step), schedule->At(step));
  return 0;
}
