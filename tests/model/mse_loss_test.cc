// Model under Loss::kMeanSquaredError (--loss mse): per-example losses are
// Keras' mse (the mean over the K outputs of the squared errors), the
// metric sums them, and Backward's gradients match central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "worker/model/cpu_backend.h"
#include "worker/model/dense_layer.h"
#include "worker/model/flatten_layer.h"
#include "worker/model/model.h"

namespace mirrored::model {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::unique_ptr<Model> SmallRegressor(int targets) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<FlattenLayer>("flatten"));
  layers.push_back(std::make_unique<DenseLayer>("dense1", 6, /*relu=*/true));
  layers.push_back(std::make_unique<DenseLayer>("dense2", targets, /*relu=*/false));
  auto m = std::make_unique<Model>("regressor", MakeCpuBackend(), std::move(layers), Shape3{3, 3, 2}, targets, 5);
  m->set_loss(Loss::kMeanSquaredError);
  return m;
}

TEST(MseLoss, ParsesTheFlagsNames) {
  EXPECT_EQ(*ParseLoss("mse"), Loss::kMeanSquaredError);
  EXPECT_EQ(*ParseLoss("sparse_categorical_crossentropy"), Loss::kSparseCategoricalCrossentropy);
  EXPECT_EQ(ParseLoss("hinge").status().message(),
            "--loss \"hinge\" is not one of sparse_categorical_crossentropy, mse");
}

TEST(MseLoss, LossesAreTheMeanSquaredErrorOfEachExample) {
  auto m = SmallRegressor(2);
  const int n = 3;
  const std::vector<float> x = Random(n * 18, 1), t = Random(n * 2, 2);
  m->Forward(n, x.data(), nullptr, t.data(), /*training=*/false);
  ASSERT_EQ(m->losses().size(), size_t(n));
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double d0 = m->logits()[i * 2] - t[i * 2], d1 = m->logits()[i * 2 + 1] - t[i * 2 + 1];
    EXPECT_NEAR(m->losses()[i], (d0 * d0 + d1 * d1) / 2, 1e-6);
    sum += m->losses()[i];
  }
  EXPECT_NEAR(m->MetricSum(), sum, 1e-6);
  EXPECT_THROW(m->Forward(n, x.data(), nullptr, nullptr, false), std::invalid_argument);
}

TEST(MseLoss, GradientsMatchCentralDifferences) {
  auto m = SmallRegressor(2);
  const int n = 4;
  const std::vector<float> x = Random(n * 18, 3), t = Random(n * 2, 4);
  const std::vector<float> w = {0.25f, 0.5f, 1.f, 0.125f};
  auto loss = [&] {
    m->Forward(n, x.data(), nullptr, t.data(), /*training=*/true);
    double l = 0;
    for (int i = 0; i < n; ++i) l += double(w[i]) * m->losses()[i];
    return l;
  };
  loss();
  m->Backward(w.data(), {});
  const std::vector<float> grads = m->store().DownloadGrads();
  constexpr float kEps = 1e-2f;
  size_t checked = 0;
  for (size_t k = 0; k < m->store().trainable().size(); ++k) {
    const TensorInfo& info = m->store().trainable()[k];
    float* p = m->store().param(int(k));
    for (size_t i = 0; i < info.size; ++i) {
      const float orig = p[i];
      p[i] = orig + kEps;
      const double up = loss();
      p[i] = orig - kEps;
      const double down = loss();
      p[i] = orig;
      const double mid = loss();
      if (std::fabs((up - mid) - (mid - down)) > 0.05 * (std::fabs(up - mid) + std::fabs(mid - down)) + 1e-7) {
        continue;  // a ReLU kink between
      }
      const double numeric = (up - down) / (2 * kEps);
      EXPECT_NEAR(grads[info.offset + i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << info.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40u);
}

}  // namespace
}  // namespace mirrored::model
