// Conv2D's padding "same" is TensorFlow's: the padding arithmetic against
// the table TensorFlow itself gave (make_fixtures.py), the CPU kernel
// against a direct convolution on uneven paddings, and a model read from
// Keras JSON, with Keras' weights, against Keras' outputs and gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "tests/model/direct_conv.h"
#include "tests/model/keras_reference.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/keras_model_json.h"
#include "worker/model/layer_spec.h"

namespace mirrored::model {
namespace {

TEST(ConvSamePadding, MatchesTensorFlowOnEveryTabledShape) {
  const KerasReference ref = KerasReference::Load();
  ASSERT_EQ(ref.padding.size(), 5u * 4u * 3u);  // in 28/14/7/5/1 x kernel 1/2/3/5 x stride 1/2/3
  for (const nlohmann::json& row : ref.padding) {
    const int in = row[0], k = row[1], s = row[2], out = row[3], before = row[4];
    const std::string what = "in " + std::to_string(in) + " kernel " + std::to_string(k) + " stride " +
                             std::to_string(s);
    const AxisPadding pad = SamePadding(in, k, s);
    EXPECT_EQ(pad.before, before) << what;
    EXPECT_EQ(WindowOutputSize(in, k, s, pad), out) << what;
    // Padding after: what the last of TensorFlow's windows reaches past the input.
    EXPECT_EQ(pad.after, std::max(0, (out - 1) * s - before + k - in)) << what;
  }
}

TEST(ConvSamePadding, HandPickedShapes) {
  struct Case {
    int in, k, s, out, before, after;
  };
  for (const Case& c : {Case{28, 3, 2, 14, 0, 1}, Case{28, 3, 1, 28, 1, 1}, Case{28, 2, 1, 28, 0, 1},
                        Case{28, 5, 3, 10, 2, 2}, Case{14, 3, 2, 7, 0, 1}, Case{7, 3, 2, 4, 1, 1},
                        Case{7, 5, 3, 3, 2, 2}, Case{5, 2, 3, 2, 0, 0}, Case{4, 4, 3, 2, 1, 2},
                        Case{1, 5, 1, 1, 2, 2}, Case{1, 2, 2, 1, 0, 1}, Case{28, 1, 2, 14, 0, 0}}) {
    const AxisPadding p = SamePadding(c.in, c.k, c.s);
    EXPECT_EQ(p, (AxisPadding{c.before, c.after})) << c.in << " " << c.k << " " << c.s;
    EXPECT_EQ(WindowOutputSize(c.in, c.k, c.s, p), c.out) << c.in << " " << c.k << " " << c.s;
  }
  EXPECT_EQ(WindowOutputSize(28, 3, 2, {}), 13);  // "valid" floors
  EXPECT_EQ(WindowOutputSize(2, 3, 1, {}), 0);    // does not fit
}

TEST(ConvSamePadding, ConvSpecAndLayerSpecShapes) {
  ConvSpec spec{.in_h = 28, .in_w = 7, .in_c = 1, .out_c = 4, .kernel = 3, .stride = 2};
  EXPECT_FALSE(spec.padded());
  EXPECT_EQ(spec.out_h(), 13);
  spec.SamePadded();
  EXPECT_EQ(spec.pad_h, (AxisPadding{0, 1}));
  EXPECT_EQ(spec.pad_w, (AxisPadding{1, 1}));
  EXPECT_FALSE(spec.symmetric());
  EXPECT_EQ(spec.out_h(), 14);
  EXPECT_EQ(spec.out_w(), 4);

  LayerSpec conv;
  conv.kind = LayerKind::kConv2D;
  conv.units = 5;
  conv.kernel = 2;
  conv.same_padding = true;
  EXPECT_EQ(*conv.OutputShape({10, 7, 3}), (Shape3{10, 7, 5}));
  conv.kernel = 5;
  conv.stride = 3;
  EXPECT_EQ(*conv.OutputShape({1, 1, 3}), (Shape3{1, 1, 5}));  // "same" always fits
  EXPECT_EQ(*conv.OutputShape({28, 14, 3}), (Shape3{10, 5, 5}));
  conv.same_padding = false;
  EXPECT_EQ(*conv.OutputShape({28, 14, 3}), (Shape3{8, 4, 5}));
  EXPECT_FALSE(conv.OutputShape({4, 14, 3}).ok());
}

// Every kernel, stride and small input of the table, the padding "same",
// on the CPU kernels (oneDNN's convolution; 1x1 as a matmul).
TEST(ConvSamePadding, CpuKernelMatchesADirectConvolution) {
  std::unique_ptr<Backend> cpu = MakeCpuBackend();
  for (int in : {7, 5, 1})
    for (int k : {1, 2, 3, 5})
      for (int s : {1, 2, 3}) {
        ConvSpec spec{.in_h = in, .in_w = in + 1, .in_c = 3, .out_c = 4, .kernel = k, .stride = s};
        ExpectConvKernelMatchesDirect(*cpu, spec.SamePadded(), 2, 1e-5);
      }
  ConvSpec no_bias{.in_h = 10, .in_w = 7, .in_c = 2, .out_c = 3, .kernel = 4, .stride = 3, .bias = false};
  ExpectConvKernelMatchesDirect(*cpu, no_bias.SamePadded(), 3, 1e-5);
  for (int side : {8, 28}) {  // stride-2 "same" as resnet's blocks take it (fewer channels)
    ConvSpec s{.in_h = side, .in_w = side, .in_c = 16, .out_c = 3, .kernel = 3, .stride = 2, .bias = false};
    ExpectConvKernelMatchesDirect(*cpu, s.SamePadded(), 4, 1e-5);
  }
}

// oneDNN 2.6 has written out of bounds on odd shapes before (see
// cpu_dnnl_kernels.cc): each buffer is fenced by sentinels, with one and
// two threads (oneDNN picks other kernels single-threaded).
TEST(ConvSamePadding, CpuKernelWritesNothingOutsideItsBuffers) {
  constexpr size_t kFence = 4096;
  constexpr float kSentinel = 12345.f;
  for (int threads : {1, 2})
    for (int side : {7, 8, 28})
      for (int channels : {2, 32}) {
        SetCpuThreadsForThisThread(threads);
        std::unique_ptr<Backend> cpu = MakeCpuBackend();
        ConvSpec s{.in_h = side, .in_w = side, .in_c = channels, .out_c = 3, .kernel = 3, .stride = 2, .bias = false};
        s.SamePadded();
        const int n = 4;
        const size_t xs = size_t(n) * s.in_h * s.in_w * s.in_c, ys = size_t(n) * s.out_h() * s.out_w() * s.out_c;
        const size_t ws = size_t(9) * s.in_c * s.out_c;
        auto fenced = [&](size_t size, float value) {
          std::vector<float> v(size + 2 * kFence, kSentinel);
          std::fill(v.begin() + kFence, v.end() - kFence, value);
          return v;
        };
        std::vector<float> x = fenced(xs, 0.5f), w = fenced(ws, 0.25f), dy = fenced(ys, 1.f), y = fenced(ys, 0.f),
                           dx = fenced(xs, 0.f), dw = fenced(ws, 0.f);
        std::unique_ptr<ConvKernel> k = cpu->MakeConv(s);
        k->Forward(n, &x[kFence], &w[kFence], nullptr, &y[kFence]);
        k->Backward(n, &x[kFence], &w[kFence], &dy[kFence], &dx[kFence], &dw[kFence], nullptr);
        k->Backward(n, &x[kFence], &w[kFence], &dy[kFence], nullptr, &dw[kFence], nullptr);
        for (const std::vector<float>* v : {&y, &dx, &dw}) {
          const bool intact = std::all_of(v->begin(), v->begin() + kFence, [](float e) { return e == kSentinel; }) &&
                              std::all_of(v->end() - kFence, v->end(), [](float e) { return e == kSentinel; });
          EXPECT_TRUE(intact) << (v == &y ? "y" : v == &dx ? "dx" : "dw") << ", " << threads << " thread(s), "
                              << side << "x" << side << "x" << channels;
        }
      }
  SetCpuThreadsForThisThread(int(std::max(1u, std::thread::hardware_concurrency())));  // the default again
}

TEST(ConvSamePadding, KerasJsonAcceptsEvenKernels) {
  StatusOr<KerasModelJson> m = KerasModelJson::ReadFile(kKerasFixtures + "tf_keras_same_padding_conv.json");
  ASSERT_TRUE(m.ok()) << m.status();
  const LayerSpec& even = m->layers()[1];
  EXPECT_EQ(even.name, "conv_even");
  EXPECT_EQ(even.kernel, 2);
  EXPECT_TRUE(even.same_padding);
}

class KerasSamePaddingConv : public ::testing::TestWithParam<std::string> {};

// The model of the Keras JSON (tf_keras's and Keras 3's), given Keras'
// weights, computes what Keras computed.
TEST_P(KerasSamePaddingConv, CpuMatchesKerasOutputsLossAndGradients) {
  const KerasReference ref = KerasReference::Load();
  const ReferenceRun run = RunKerasReference(MakeCpuBackend(), ref, GetParam());
  ExpectMatches(ref.output, run.output, 1e-5, "output");
  EXPECT_NEAR(run.loss, ref.loss, 1e-5 * std::max(1.f, ref.loss));
  ASSERT_EQ(run.gradients.size(), ref.gradients.size());
  for (const auto& [name, want] : ref.gradients) ExpectMatches(want, run.gradients.at(name), 1e-5, name);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KerasSamePaddingConv,
                         ::testing::Values("tf_keras_same_padding_conv", "keras3_same_padding_conv"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mirrored::model
