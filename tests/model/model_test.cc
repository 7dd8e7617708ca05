// Model zoo: parameter layout for data parallelism, gradient-ready order,
// seeded determinism, independence of models in different threads,
// optimizers, and inference vs training mode.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "worker/model/cpu_backend.h"
#include "worker/model/model.h"
#include "worker/model/optimizer.h"

namespace mirrored::model {
namespace {

// One oneDNN thread per test thread: the suite shares 2 cores with others.
const bool kSingleThreaded = (SetCpuThreadsForThisThread(1), true);

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch RandomBatch(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Batch b{std::vector<float>(size_t(n) * 784), std::vector<int32_t>(size_t(n))};
  for (float& v : b.x) v = u(rng);
  for (int32_t& v : b.y) v = int32_t(rng() % 10);
  return b;
}

std::unique_ptr<Model> Make(const std::string& name, uint64_t seed) {
  auto m = Model::Create(name, MakeCpuBackend(), seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

TEST(ModelTest, UnknownModelIsUsageError) {
  auto m = Model::Create("vgg", MakeCpuBackend(), 1);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ExitCodeFor(m.status()), 2);
  EXPECT_NE(m.status().message().find("vgg"), std::string::npos);
}

// The zoo is built for the data's images and classes: a 12x10x3, 4-class
// set trains every model; cnn refuses images its two conv + pool stages
// cannot take, naming both shapes.
TEST(ModelTest, ZooModelsTakeTheDatasImageShapeAndClasses) {
  for (const std::string name : {"mlp", "cnn", "resnet"}) {
    auto m = Model::Create(name, MakeCpuBackend(), 3, {12, 10, 3}, 4);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ((*m)->input_shape(), (Shape3{12, 10, 3}));
    std::vector<float> x(2 * 360, 0.5f);
    std::vector<int32_t> y = {3, 1};
    (*m)->Forward(2, x.data(), y.data(), /*training=*/true);
    EXPECT_EQ((*m)->logits().size(), 8u) << name;
  }
  auto small = Model::Create("cnn", MakeCpuBackend(), 1, {9, 12, 1}, 10);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(ExitCodeFor(small.status()), 2);
  EXPECT_NE(small.status().message().find("--model cnn needs images of at least 10x10xC"), std::string::npos)
      << small.status();
  EXPECT_NE(small.status().message().find("--data gives 9x12x1"), std::string::npos) << small.status();
  EXPECT_TRUE(Model::Create("mlp", MakeCpuBackend(), 1, {9, 12, 1}, 10).ok());
}

TEST(ModelTest, CnnLayoutIsNamedContiguousAndAligned) {
  auto m = Make("cnn", 1);
  const auto& t = m->store().trainable();
  std::vector<std::string> names;
  size_t count = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    names.push_back(t[i].name);
    count += t[i].size;
    EXPECT_EQ(t[i].offset % ParameterStore::kAlignFloats, 0u);
    if (i > 0) {
      EXPECT_GE(t[i].offset, t[i - 1].offset + t[i - 1].size);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"conv1/kernel", "conv1/bias", "conv2/kernel", "conv2/bias",
                                             "dense1/kernel", "dense1/bias", "dense2/kernel", "dense2/bias"}));
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{3, 3, 1, 32}));
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{1600, 128}));
  EXPECT_EQ(count, 225034u);  // the Keras summary of the same model
  EXPECT_LE(m->store().params_size(), count + t.size() * ParameterStore::kAlignFloats);
  EXPECT_TRUE(m->store().state().empty());
}

TEST(ModelTest, ResnetHasBatchNormStateAndReportsGradientsInReverse) {
  auto m = Make("resnet", 1);
  EXPECT_GE(m->store().FindState("stem/bn/moving_mean"), 0);
  EXPECT_GE(m->store().FindState("block2/shortcut/bn/moving_variance"), 0);
  EXPECT_GE(m->store().FindTrainable("block3/conv2/kernel"), 0);
  Batch b = RandomBatch(8, 3);
  m->Forward(8, b.x.data(), b.y.data(), true);
  std::vector<float> w(8, 1.f / 8);
  std::vector<int> ready;
  m->Backward(w.data(), [&](int i) { ready.push_back(i); });
  ASSERT_EQ(ready.size(), m->store().trainable().size());
  for (size_t i = 0; i < ready.size(); ++i) EXPECT_EQ(ready[i], int(ready.size() - 1 - i));
  // Training mode moved the running statistics away from (0, 1).
  auto state = m->store().DownloadState();
  const TensorInfo& mean = m->store().state()[size_t(m->store().FindState("stem/bn/moving_mean"))];
  float moved = 0;
  for (size_t i = 0; i < mean.size; ++i) moved += std::fabs(state[mean.offset + i]);
  EXPECT_GT(moved, 0.f);
}

TEST(ModelTest, SameSeedSameWeightsAndLossesDifferentSeedDiffers) {
  for (const char* name : {"mlp", "cnn", "resnet"}) {
    auto a = Make(name, 42), b = Make(name, 42), c = Make(name, 43);
    EXPECT_EQ(a->store().DownloadParams(), b->store().DownloadParams()) << name;
    EXPECT_NE(a->store().DownloadParams(), c->store().DownloadParams()) << name;
    Batch batch = RandomBatch(16, 4);
    a->Forward(16, batch.x.data(), batch.y.data(), true);
    b->Forward(16, batch.x.data(), batch.y.data(), true);
    EXPECT_EQ(a->losses(), b->losses()) << name;
    EXPECT_EQ(a->losses().size(), 16u);
    // An untrained classifier: mean loss near log(10).
    double mean = 0;
    for (float l : a->losses()) mean += l / 16.0;
    EXPECT_NEAR(mean, std::log(10.0), 1.5) << name;
  }
}

// The data-parallel trainer runs one model per thread: results must not
// depend on what the other thread does.
TEST(ModelTest, ModelsInTwoThreadsAreIndependent) {
  Batch batch = RandomBatch(32, 5);
  std::vector<float> w(32, 1.f / 32);
  auto run = [&](std::vector<float>* grads) {
    SetCpuThreadsForThisThread(1);
    auto m = Make("cnn", 9);
    for (int step = 0; step < 3; ++step) {
      m->Forward(32, batch.x.data(), batch.y.data(), true);
      m->Backward(w.data(), {});
    }
    *grads = m->store().DownloadGrads();
  };
  std::vector<float> alone, t1, t2;
  run(&alone);
  std::thread a(run, &t1), b(run, &t2);
  a.join();
  b.join();
  EXPECT_EQ(t1, alone);
  EXPECT_EQ(t2, alone);
}

TEST(ModelTest, AdamAndSgdReduceTheLossOnAFixedBatch) {
  for (const char* opt_name : {"adam", "sgd"}) {
    auto m = Make("mlp", 2);
    auto opt = Optimizer::Create(opt_name, opt_name == std::string("adam") ? 1e-3f : 0.05f);
    ASSERT_TRUE(opt.ok());
    (*opt)->Bind(&m->store(), &m->backend());
    Batch b = RandomBatch(64, 6);
    std::vector<float> w(64, 1.f / 64);
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      m->Forward(64, b.x.data(), b.y.data(), true);
      double mean = 0;
      for (float l : m->losses()) mean += l / 64;
      (step == 0 ? first : last) = mean;
      m->Backward(w.data(), {});
      (*opt)->Apply();
    }
    EXPECT_LT(last, 0.5 * first) << opt_name;
    EXPECT_EQ((*opt)->iterations(), 30);
    EXPECT_EQ((*opt)->slot_names().size(), opt_name == std::string("adam") ? 2u : 1u);
  }
  EXPECT_FALSE(Optimizer::Create("rmsprop", 1e-3f).ok());
  EXPECT_EQ(ExitCodeFor(Optimizer::Create("adam", -1.f).status()), 2);
}

TEST(ModelTest, InferenceUsesMovingStatisticsAndCountsCorrect) {
  auto m = Make("resnet", 3);
  Batch b = RandomBatch(8, 7);
  m->Forward(8, b.x.data(), b.y.data(), /*training=*/false);
  auto state_before = m->store().DownloadState();
  m->Forward(8, b.x.data(), b.y.data(), false);
  EXPECT_EQ(m->store().DownloadState(), state_before);  // inference updates nothing
  EXPECT_GE(m->CorrectCount(), 0);
  EXPECT_LE(m->CorrectCount(), 8);
  // A batch of one example works in inference mode (evaluation remainders).
  m->Forward(1, b.x.data(), b.y.data(), false);
  EXPECT_EQ(m->logits().size(), 10u);
  // An empty shard: no outputs, zero gradients, every tensor still reported.
  m->Forward(0, nullptr, nullptr, true);
  EXPECT_TRUE(m->losses().empty());
  int reported = 0;
  m->Backward(nullptr, [&](int) { ++reported; });
  EXPECT_EQ(reported, int(m->store().trainable().size()));
  for (float g : m->store().DownloadGrads()) ASSERT_EQ(g, 0.f);
}

}  // namespace
}  // namespace mirrored::model
