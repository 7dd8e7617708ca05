// The zoo's models stay what checkpoints and earlier runs know:
// tests/model/zoo/zoo_tensors.txt was written by the zoo as it was built
// before it became a Keras model (the layers made one by one). It lists,
// per model, every tensor's name and shape (what a checkpoint holds and
// RestoreModel matches), the sum of |x| of its initial values for seed 42
// (the same initializer, fan-in and fan-out), of its gradient after one
// training step on a fixed batch, and that batch's logits. A mismatch
// writes the actual text beside the test's temporary files for a diff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/model/random_batch.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/model.h"

namespace mirrored::model {
namespace {

const bool kSingleThreaded = (SetCpuThreadsForThisThread(1), true);

const std::string kFixture = std::string(MIRRORED_SOURCE_DIR) + "/tests/model/zoo/zoo_tensors.txt";
constexpr int kExamples = 4;
constexpr uint64_t kSeed = 42;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

double AbsSum(const std::vector<float>& buffer, const TensorInfo& t) {
  double sum = 0;
  for (size_t i = 0; i < t.size; ++i) sum += std::fabs(double(buffer[t.offset + i]));
  return sum;
}

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// One line per tensor ("resnet param block1/conv1/kernel 3x3x32x32 init=.. grad=.."),
// sorted by name (the layout's order is free), then the logits.
std::vector<std::string> Describe(const std::string& name) {
  auto created = Model::Create(name, MakeCpuBackend(), kSeed, {28, 28, 1}, 10);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return {};
  Model& m = **created;
  const std::vector<float> init = m.store().DownloadParams();
  const RandomBatch b = MakeRandomBatch(kExamples, 5);
  m.Forward(kExamples, b.images.data(), b.labels.data(), /*training=*/true);
  const std::vector<float> weights(kExamples, 1.f / kExamples);
  m.Backward(weights.data(), nullptr);
  const std::vector<float> grads = m.store().DownloadGrads(), state = m.store().DownloadState();
  std::vector<std::string> lines;
  for (const TensorInfo& t : m.store().trainable()) {
    lines.push_back(name + " param " + t.name + " " + ShapeText(t.shape) + " init=" + Number(AbsSum(init, t)) +
                    " grad=" + Number(AbsSum(grads, t)));
  }
  for (const TensorInfo& t : m.store().state())
    lines.push_back(name + " state " + t.name + " " + ShapeText(t.shape) + " after=" + Number(AbsSum(state, t)));
  std::sort(lines.begin(), lines.end());
  std::string logits = name + " logits";
  for (float z : m.logits()) logits += " " + Number(z);
  lines.push_back(logits);
  return lines;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

// Whether two lines agree: the same words, numbers within a relative 1e-5
// (the same arithmetic may round differently when oneDNN picks another
// kernel for another buffer layout).
bool Agree(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string u, v;
  while (x >> u) {
    if (!(y >> v)) return false;
    const size_t eu = u.find('='), ev = v.find('=');
    const std::string nu = eu == std::string::npos ? u : u.substr(eu + 1);
    const std::string nv = ev == std::string::npos ? v : v.substr(ev + 1);
    if (u.substr(0, eu + 1) != v.substr(0, ev + 1)) return false;
    char* end_u = nullptr;
    char* end_v = nullptr;
    const double du = std::strtod(nu.c_str(), &end_u), dv = std::strtod(nv.c_str(), &end_v);
    const bool numbers = *end_u == '\0' && *end_v == '\0' && !nu.empty() && !nv.empty();
    if (!numbers) {
      if (nu != nv) return false;
    } else if (std::fabs(du - dv) > 1e-5 * std::max(1.0, std::fabs(du))) {
      return false;
    }
  }
  return !(y >> v);
}

class ZooFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooFixtureTest, TensorsInitialValuesGradientsAndLogitsAreTheRecordedOnes) {
  std::vector<std::string> expected;
  for (const std::string& line : ReadLines(kFixture))
    if (line.rfind(GetParam() + " ", 0) == 0) expected.push_back(line);
  ASSERT_FALSE(expected.empty()) << kFixture << " has no lines for " << GetParam();
  const std::vector<std::string> actual = Describe(GetParam());
  bool same = actual.size() == expected.size();
  for (size_t i = 0; same && i < actual.size(); ++i) same = Agree(expected[i], actual[i]);
  if (!same) {
    const std::string out = ::testing::TempDir() + "/zoo_tensors." + GetParam() + ".actual";
    std::ofstream f(out);
    for (const std::string& line : actual) f << line << "\n";
    ADD_FAILURE() << GetParam() << " differs from " << kFixture << "; the actual lines are in " << out;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooFixtureTest, ::testing::Values("mlp", "cnn", "resnet"));

}  // namespace
}  // namespace mirrored::model
