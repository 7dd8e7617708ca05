// A reproducible batch of n Fashion-MNIST-shaped examples for the model
// tests: pixels uniform in [0, 1), labels uniform over the 10 classes.
//
//   RandomBatch b = MakeRandomBatch(32, /*seed=*/3);
//   model->Forward(32, b.images.data(), b.labels.data(), true);
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mirrored::model {

struct RandomBatch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

inline RandomBatch MakeRandomBatch(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  RandomBatch b{std::vector<float>(size_t(n) * 784), std::vector<int32_t>(size_t(n))};
  for (float& v : b.images) v = u(rng);
  for (int32_t& v : b.labels) v = int32_t(rng() % 10);
  return b;
}

}  // namespace mirrored::model
