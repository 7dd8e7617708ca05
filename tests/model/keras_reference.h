// What Keras computed for tests/model/keras/same_padding_conv_reference.json
// (make_fixtures.py: TensorFlow's "same" padding table, and a model's
// outputs, mean squared error and gradients with fixed weights and inputs),
// and the same run through mirrored on any backend, for the tests to compare.
//
//   KerasReference ref = KerasReference::Load();
//   ReferenceRun run = RunKerasReference(MakeCpuBackend(), ref);
//   ExpectMatches(ref.output, run.output, 1e-5, "output");
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/model/model_choice.h"

namespace mirrored::model {

inline const std::string kKerasFixtures = std::string(MIRRORED_SOURCE_DIR) + "/tests/model/keras/";

struct KerasReference {
  nlohmann::json padding;  // [[in, kernel, stride, out, before], ...]
  int batch = 0;
  std::vector<float> input, target, output;  // NHWC input; [batch, outputs]
  float loss = 0;
  std::map<std::string, std::vector<float>> weights, gradients;  // by mirrored's tensor names

  static KerasReference Load() {
    std::ifstream in(kKerasFixtures + "same_padding_conv_reference.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    KerasReference r;
    r.padding = j["padding"];
    r.batch = j["batch"];
    r.input = j["input"].get<std::vector<float>>();
    r.target = j["target"].get<std::vector<float>>();
    r.output = j["output"].get<std::vector<float>>();
    r.loss = j["loss"];
    r.weights = j["weights"].get<std::map<std::string, std::vector<float>>>();
    r.gradients = j["gradients"].get<std::map<std::string, std::vector<float>>>();
    return r;
  }
};

struct ReferenceRun {
  std::vector<float> output;
  float loss = 0;  // the mean of the per-example losses, as Keras reduces them
  std::map<std::string, std::vector<float>> gradients;
};

// Builds the reference's model (<model>.json, tf_keras's by default) on
// `backend`, sets the reference's weights, and runs its batch through a
// training Forward under mse and a Backward. Fails the test (ADD_FAILURE)
// and returns what it has when a tensor is missing or misshapen.
inline ReferenceRun RunKerasReference(std::unique_ptr<Backend> backend, const KerasReference& ref,
                                      const std::string& model = "tf_keras_same_padding_conv") {
  ReferenceRun run;
  StatusOr<ModelChoice> choice = ModelChoice::FromFlags("", kKerasFixtures + model + ".json");
  if (!choice.ok()) {
    ADD_FAILURE() << choice.status();
    return run;
  }
  const int outputs = choice->keras()->outputs();
  auto m = choice->Create(std::move(backend), 1, choice->keras()->input_shape(), outputs);
  if (!m.ok()) {
    ADD_FAILURE() << m.status();
    return run;
  }
  Model& net = **m;
  net.set_loss(Loss::kMeanSquaredError);
  std::vector<float> params = net.store().DownloadParams();
  EXPECT_EQ(net.store().trainable().size(), ref.weights.size());
  for (const TensorInfo& t : net.store().trainable()) {
    auto w = ref.weights.find(t.name);
    if (w == ref.weights.end() || w->second.size() != t.size) {
      ADD_FAILURE() << "the reference has no tensor " << t.name << " of " << t.size << " values";
      return run;
    }
    std::copy(w->second.begin(), w->second.end(), params.begin() + std::ptrdiff_t(t.offset));
  }
  EXPECT_TRUE(net.store().UploadParams(params).ok());
  const int n = ref.batch;
  net.Forward(n, ref.input.data(), nullptr, ref.target.data(), true);
  run.output = net.logits();
  for (float l : net.losses()) run.loss += l / float(n);
  std::vector<float> weights(size_t(n), 1.f / float(n));
  net.Backward(weights.data(), {});
  const std::vector<float> grads = net.store().DownloadGrads();
  for (const TensorInfo& t : net.store().trainable()) {
    run.gradients[t.name].assign(grads.begin() + std::ptrdiff_t(t.offset),
                                 grads.begin() + std::ptrdiff_t(t.offset + t.size));
  }
  return run;
}

// |want - got| <= tolerance * max(1, |want|) everywhere; the worst element
// is named.
inline void ExpectMatches(const std::vector<float>& want, const std::vector<float>& got, double tolerance,
                          const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double worst = -1;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double excess = std::fabs(double(want[i]) - got[i]) / std::max(1.0, std::fabs(double(want[i])));
    if (excess > worst) worst = excess, at = i;
  }
  EXPECT_LE(worst, tolerance) << what << "[" << at << "]: Keras " << want[at] << ", mirrored " << got[at];
}

}  // namespace mirrored::model
