// ModelSnapshot::AllFinite: the trainer's last guard against checkpointing a
// diverged model (a NaN or infinity in the weights or an optimizer slot).
#include "worker/checkpoint/model_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "worker/model/cpu_backend.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"

namespace mirrored {
namespace {

struct Fixture {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<model::Optimizer> adam;
};

Fixture Make() {
  Fixture f;
  auto model = model::Model::Create("mlp", model::MakeCpuBackend(), 1);
  EXPECT_TRUE(model.ok()) << model.status();
  f.model = std::move(model).value();
  auto adam = model::Optimizer::Create("adam", 1e-3f);
  EXPECT_TRUE(adam.ok()) << adam.status();
  f.adam = std::move(adam).value();
  f.adam->Bind(&f.model->store(), &f.model->backend());
  return f;
}

TEST(ModelSnapshotTest, FreshModelIsFinite) {
  Fixture f = Make();
  EXPECT_TRUE(ModelSnapshot::Take(*f.model, *f.adam).AllFinite());
}

TEST(ModelSnapshotTest, NaNWeightIsNotFinite) {
  Fixture f = Make();
  f.model->store().params_data()[f.model->store().params_size() / 2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(ModelSnapshot::Take(*f.model, *f.adam).AllFinite());
}

TEST(ModelSnapshotTest, InfiniteOptimizerSlotIsNotFinite) {
  Fixture f = Make();
  ASSERT_FALSE(f.adam->slot_names().empty());
  f.adam->slot_data(f.adam->slot_names().size() - 1)[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(ModelSnapshot::Take(*f.model, *f.adam).AllFinite());
}

}  // namespace
}  // namespace mirrored
