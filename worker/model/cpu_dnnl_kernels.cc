#include "worker/model/cpu_dnnl_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <map>
#include <vector>

#include "worker/model/cpu_im2col_weight_gradient.h"

namespace mirrored::model {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

memory Mem(const memory::desc& md, DnnlContext* ctx, const void* p) {
  return memory(md, ctx->engine, const_cast<void*>(p));
}

// Scratch of at least `bytes`, reused across calls.
void* Scratch(std::vector<float>& buf, size_t bytes) {
  if (buf.size() * sizeof(float) < bytes) buf.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return buf.data();
}

dnnl::primitive_attr ReluAttr(bool relu) {
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// db[c] = sum over rows of dy[row, c], in FP32, rows in order: a layer's
// bias gradient from its FP32 output gradient.
void SumRows(const float* dy, size_t rows, int channels, float* db) {
  std::fill(db, db + channels, 0.f);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = dy + r * size_t(channels);
    for (int c = 0; c < channels; ++c) db[c] += row[c];
  }
}

// A tensor in the layout and type a primitive reads: the tensor itself
// where they are the given ones, else a copy made by a cached oneDNN reorder
// (a blocked kernel layout; FP32 -> bf16, rounding to nearest even) into a
// buffer the kernel keeps. Forward's copies serve its Backward (Reuse).
class ReorderedCopy {
 public:
  // `src`, described by `from`, as `to` describes it.
  const void* From(DnnlContext* ctx, const memory::desc& from, const memory::desc& to, const float* src) {
    if (from == to) return src;
    if (!(to == to_) || !(from == from_)) {
      from_ = from;
      to_ = to;
      reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(ctx->engine, from, ctx->engine, to));
    }
    void* out = Scratch(buf_, to.get_size());
    memory a = Mem(from, ctx, src), b = Mem(to, ctx, out);
    reorder_.execute(ctx->stream, a, b);
    src_ = src;
    return out;
  }
  // The same, without converting again when the last copy was made from
  // `src` in these layouts (Backward after its Forward).
  const void* Reuse(DnnlContext* ctx, const memory::desc& from, const memory::desc& to, const float* src) {
    if (from == to) return src;
    if (src == src_ && to == to_ && from == from_) return buf_.data();
    return From(ctx, from, to, src);
  }

 private:
  memory::desc from_, to_;
  dnnl::reorder reorder_;
  std::vector<float> buf_;
  const float* src_ = nullptr;
};

// ---------------------------------------------------------------- dense ----
// bf16: Y = bf16(X) bf16(W) in FP32; dX = bf16(dY) bf16(W)^T and
// dW = bf16(X)^T bf16(dY), both FP32; the bias gradient sums dY in FP32.
class DnnlDense final : public DenseKernel {
 public:
  DnnlDense(DnnlContext* ctx, const DenseSpec& s, bool bf16) : ctx_(ctx), s_(s), bf16_(bf16) {}

  void Forward(int n, const float* x, const float* w, const float* b, float* y) override {
    Prims& p = Get(n);
    const void* xp = x16_.From(ctx_, p.x, p.x_in, x);
    const void* wp = w16_.From(ctx_, p.w, p.w_in, w);
    p.fwd.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.x_in, ctx_, xp)},
                                 {DNNL_ARG_WEIGHTS, Mem(p.w_in, ctx_, wp)},
                                 {DNNL_ARG_BIAS, Mem(p.b, ctx_, b)},
                                 {DNNL_ARG_DST, Mem(p.y, ctx_, y)}});
    ctx_->stream.wait();
  }

  void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    Prims& p = Get(n);
    const void* xp = x16_.Reuse(ctx_, p.x, p.x_in, x);
    const void* wp = w16_.Reuse(ctx_, p.w, p.w_in, w);
    const void* dyp = dy16_.From(ctx_, p.y, p.y_in, dy);
    if (dx != nullptr) {
      p.bwd_data.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.y_in, ctx_, dyp)},
                                        {DNNL_ARG_WEIGHTS, Mem(p.w_t_in, ctx_, wp)},
                                        {DNNL_ARG_DST, Mem(p.x, ctx_, dx)}});
    }
    p.bwd_weights.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.x_t_in, ctx_, xp)},
                                         {DNNL_ARG_WEIGHTS, Mem(p.y_in, ctx_, dyp)},
                                         {DNNL_ARG_DST, Mem(p.w, ctx_, dw)}});
    ctx_->stream.wait();
    SumRows(dy, size_t(n), s_.out, db);
  }

 private:
  // FP32 tensors (x, w, b, y: also dx, dw, dy as given) and the products'
  // operands in the products' type (*_in: bf16 copies, or the same FP32).
  struct Prims {
    memory::desc x, w, b, y, x_in, x_t_in, w_in, w_t_in, y_in;
    dnnl::matmul fwd, bwd_data, bwd_weights;
  };

  Prims& Get(int n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    const memory::dim N = n, I = s_.in, O = s_.out;
    const dt in = bf16_ ? dt::bf16 : dt::f32;
    Prims p;
    p.x = memory::desc({N, I}, dt::f32, tag::ab);
    p.w = memory::desc({I, O}, dt::f32, tag::ab);
    p.b = memory::desc({1, O}, dt::f32, tag::ab);
    p.y = memory::desc({N, O}, dt::f32, tag::ab);
    p.x_in = memory::desc({N, I}, in, tag::ab);
    p.x_t_in = memory::desc({I, N}, in, tag::ba);  // x viewed as x^T
    p.w_in = memory::desc({I, O}, in, tag::ab);
    p.w_t_in = memory::desc({O, I}, in, tag::ba);  // W viewed as W^T
    p.y_in = memory::desc({N, O}, in, tag::ab);
    p.fwd = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.x_in, p.w_in, p.b, p.y),
                                                      ReluAttr(s_.relu), ctx_->engine));
    p.bwd_data =
        dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.y_in, p.w_t_in, p.x), ctx_->engine));
    p.bwd_weights =
        dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.x_t_in, p.y_in, p.w), ctx_->engine));
    return cache_.emplace(n, std::move(p)).first->second;
  }

  DnnlContext* ctx_;
  DenseSpec s_;
  bool bf16_;
  std::map<int, Prims> cache_;
  ReorderedCopy x16_, w16_, dy16_;  // bf16 copies (FP32: the tensors themselves)
};

// ----------------------------------------------------------------- conv ----
// Forward and backward data are oneDNN's primitives; the kernel gradient is
// oneDNN's backward-weights primitive or Im2colWeightGradient (`dw`, FP32
// only). bf16: the primitives read bf16 copies of x, dy and the kernel (in
// the primitive's layout) and write FP32 y, dx, dw and db.
class DnnlConv final : public ConvKernel {
 public:
  DnnlConv(DnnlContext* ctx, const ConvSpec& s, ConvWeightGradient dw)
      : ctx_(ctx), s_(s), bf16_(ctx->bf16() && ConvComputesIn16Bit(s)) {
    const bool gemm = dw == ConvWeightGradient::kIm2colGemm ||
                      (dw == ConvWeightGradient::kFastestMeasured && (s.in_c == 1 || s.bias));
    if (gemm && !bf16_) gemm_dw_ = std::make_unique<Im2colWeightGradient>(s);
  }

  void Forward(int n, const float* x, const float* w, const float* b, float* y) override {
    Prims& p = Get(n);
    const void* xp = x16_.From(ctx_, p.x, p.x_in, x);
    const void* wp = fwd_w_.From(ctx_, p.user_w, p.fwd_pd.weights_desc(), w);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, Mem(p.x_in, ctx_, xp)},
                                         {DNNL_ARG_WEIGHTS, Mem(p.fwd_pd.weights_desc(), ctx_, wp)},
                                         {DNNL_ARG_DST, Mem(p.y, ctx_, y)}};
    if (s_.bias) args.emplace(DNNL_ARG_BIAS, Mem(p.b, ctx_, b));
    p.fwd.execute(ctx_->stream, args);
    ctx_->stream.wait();
  }

  void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    Prims& p = Get(n);
    const void* dyp = dy16_.From(ctx_, p.y, p.y_in, dy);
    if (dx != nullptr) {
      const void* wp = bwd_w_.From(ctx_, p.user_w, p.bwd_data_pd.weights_desc(), w);
      p.bwd_data.execute(ctx_->stream, {{DNNL_ARG_DIFF_DST, Mem(p.y_in, ctx_, dyp)},
                                        {DNNL_ARG_WEIGHTS, Mem(p.bwd_data_pd.weights_desc(), ctx_, wp)},
                                        {DNNL_ARG_DIFF_SRC, Mem(p.x, ctx_, dx)}});
    }
    if (gemm_dw_ != nullptr) {
      ctx_->stream.wait();  // dx complete before returning, as on oneDNN's path
      gemm_dw_->Compute(n, x, dy, dw, db);
      return;
    }
    BackwardWeights(p, x16_.Reuse(ctx_, p.x, p.x_in, x), dyp, dw, db);
    // bf16: the bias gradient from the FP32 dy, as the dense layer's and the
    // GPU's (oneDNN's would sum the bf16 copy).
    if (bf16_ && s_.bias) SumRows(dy, size_t(n) * s_.out_h() * s_.out_w(), s_.out_c, db);
  }

 private:
  // x, y: the FP32 activations (and dx, dy as given); x_in, y_in: what the
  // primitives read, the bf16 copies' layout or the same FP32.
  struct Prims {
    memory::desc x, y, x_in, y_in, b, user_w;
    dnnl::convolution_forward::primitive_desc fwd_pd;
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data bwd_data;
    dnnl::convolution_backward_weights bwd_weights;
  };

  // oneDNN's backward-weights primitive, its FP32 kernel gradient reordered
  // to HWIO; and the bias gradient in FP32 (not for bf16: Backward sums it).
  void BackwardWeights(Prims& p, const void* x, const void* dy, float* dw, float* db) {
    const memory::desc& dw_md = p.bwd_weights_pd.diff_weights_desc();
    const bool direct = dw_md == p.user_w;
    void* dwp = direct ? static_cast<void*>(dw) : Scratch(dw_scratch_, dw_md.get_size());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, Mem(p.x_in, ctx_, x)},
                                         {DNNL_ARG_DIFF_DST, Mem(p.y_in, ctx_, dy)},
                                         {DNNL_ARG_DIFF_WEIGHTS, Mem(dw_md, ctx_, dwp)}};
    if (s_.bias && !bf16_) args.emplace(DNNL_ARG_DIFF_BIAS, Mem(p.b, ctx_, db));
    p.bwd_weights.execute(ctx_->stream, args);
    if (!direct) {
      memory src = Mem(dw_md, ctx_, dwp), dst = Mem(p.user_w, ctx_, dw);
      dnnl::reorder(src, dst).execute(ctx_->stream, src, dst);
    }
    ctx_->stream.wait();
  }

  Prims& Get(int n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    const memory::dim N = n, IC = s_.in_c, OC = s_.out_c, K = s_.kernel;
    const dt in = bf16_ ? dt::bf16 : dt::f32;
    Prims p;
    p.x = memory::desc({N, IC, s_.in_h, s_.in_w}, dt::f32, tag::nhwc);
    p.y = memory::desc({N, OC, s_.out_h(), s_.out_w()}, dt::f32, tag::nhwc);
    p.x_in = memory::desc({N, IC, s_.in_h, s_.in_w}, in, tag::nhwc);
    p.y_in = memory::desc({N, OC, s_.out_h(), s_.out_w()}, in, tag::nhwc);
    p.b = memory::desc({OC}, dt::f32, tag::a);
    p.user_w = memory::desc({OC, IC, K, K}, dt::f32, tag::hwio);
    memory::desc any_w({OC, IC, K, K}, in, tag::any), any_dw({OC, IC, K, K}, dt::f32, tag::any);
    // The spec's padding as it is: oneDNN pads the top / left (pad) and the
    // bottom / right (pad_r) separately, and floors (in + pad + pad_r - k) /
    // stride exactly as ConvSpec does. (A negative right padding, which would
    // also describe a "valid" strided shape, makes oneDNN 2.6's strided 1x1
    // kernels write out of bounds: the padding stays the spec's, never below 0.)
    memory::dims strides{s_.stride, s_.stride}, pad{s_.pad_h.before, s_.pad_w.before},
        pad_r{s_.pad_h.after, s_.pad_w.after};
    auto alg = dnnl::algorithm::convolution_direct;
    auto fwd_desc = s_.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, p.x_in, any_w,
                                                              p.b, p.y, strides, pad, pad_r)
                            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, p.x_in, any_w,
                                                              p.y, strides, pad, pad_r);
    p.fwd_pd = dnnl::convolution_forward::primitive_desc(fwd_desc, ReluAttr(s_.relu), ctx_->engine);
    p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
        dnnl::convolution_backward_data::desc(alg, p.x, any_w, p.y_in, strides, pad, pad_r), ctx_->engine, p.fwd_pd);
    auto bw_desc = s_.bias && !bf16_
                       ? dnnl::convolution_backward_weights::desc(alg, p.x_in, any_dw, p.b, p.y_in, strides, pad, pad_r)
                       : dnnl::convolution_backward_weights::desc(alg, p.x_in, any_dw, p.y_in, strides, pad, pad_r);
    p.fwd = dnnl::convolution_forward(p.fwd_pd);
    p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
    if (gemm_dw_ == nullptr) {
      p.bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(bw_desc, ctx_->engine, p.fwd_pd);
      p.bwd_weights = dnnl::convolution_backward_weights(p.bwd_weights_pd);
    }
    return cache_.emplace(n, std::move(p)).first->second;
  }

  DnnlContext* ctx_;
  ConvSpec s_;
  bool bf16_;
  std::map<int, Prims> cache_;
  std::vector<float> dw_scratch_;
  ReorderedCopy x16_, dy16_;    // bf16 copies (FP32: the tensors themselves)
  ReorderedCopy fwd_w_, bwd_w_;  // the kernel in each primitive's layout and type
  std::unique_ptr<Im2colWeightGradient> gemm_dw_;  // null: oneDNN's primitive
};

// ------------------------------------------------------ pointwise conv ----
// A 1x1 convolution is a matmul over the (subsampled) pixels:
// Y[n*oh*ow, oc] = X[::s, ::s][n*oh*ow, ic] . W[ic, oc], and an HWIO 1x1
// kernel is exactly that [ic, oc] matrix. Unpadded only; a 1x1 "same"
// convolution is unpadded too (SamePadding's total is 0 for a window of 1).
// oneDNN 2.6's jit_1x1:avx2 convolution on NHWC with stride 2 corrupts the
// heap (seen in the gradient-check tests), so 1x1 convolutions never reach it.
class DnnlPointwiseConv final : public ConvKernel {
 public:
  DnnlPointwiseConv(DnnlContext* ctx, const ConvSpec& s)
      : s_(s),
        dense_(ctx, DenseSpec{s.in_c, s.out_c, s.relu}, ctx->bf16() && ConvComputesIn16Bit(s)),
        zero_bias_(size_t(s.out_c), 0.f),
        db_scratch_(size_t(s.out_c)) {}

  void Forward(int n, const float* x, const float* w, const float* b, float* y) override {
    const int rows = n * s_.out_h() * s_.out_w();
    dense_.Forward(rows, Subsample(n, x), w, s_.bias ? b : zero_bias_.data(), y);
  }

  void Backward(int n, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    const int rows = n * s_.out_h() * s_.out_w();
    const bool strided = s_.stride != 1;
    float* dxs = dx;
    if (dx != nullptr && strided) dxs = static_cast<float*>(Scratch(dxs_, size_t(rows) * s_.in_c * sizeof(float)));
    // Forward's gathered pixels are still in xs_ (Backward follows its Forward).
    const float* xs = strided ? xs_.data() : x;
    dense_.Backward(rows, xs, w, dy, dxs, dw, s_.bias ? db : db_scratch_.data());
    if (dx != nullptr && strided) {  // scatter back; pixels the stride skipped get zero gradient
      std::fill(dx, dx + size_t(n) * s_.in_h * s_.in_w * s_.in_c, 0.f);
      ForEachPixel(n, [&](size_t out_pixel, size_t in_pixel) {
        std::copy(dxs + out_pixel * s_.in_c, dxs + (out_pixel + 1) * s_.in_c, dx + in_pixel * s_.in_c);
      });
    }
  }

 private:
  template <typename F>
  void ForEachPixel(int n, F f) {
    size_t o = 0;
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < s_.out_h(); ++i)
        for (int j = 0; j < s_.out_w(); ++j, ++o)
          f(o, (size_t(b) * s_.in_h + size_t(i) * s_.stride) * s_.in_w + size_t(j) * s_.stride);
  }

  // x itself at stride 1, else the strided pixels gathered contiguously.
  const float* Subsample(int n, const float* x) {
    if (s_.stride == 1) return x;
    float* xs = static_cast<float*>(Scratch(xs_, size_t(n) * s_.out_h() * s_.out_w() * s_.in_c * sizeof(float)));
    ForEachPixel(n, [&](size_t out_pixel, size_t in_pixel) {
      std::copy(x + in_pixel * s_.in_c, x + (in_pixel + 1) * s_.in_c, xs + out_pixel * s_.in_c);
    });
    return xs;
  }

  ConvSpec s_;
  DnnlDense dense_;
  std::vector<float> zero_bias_, db_scratch_, xs_, dxs_;
};

// -------------------------------------------------------------- pooling ----
// Max pooling (with its argmax workspace) or average pooling (none).
class DnnlPool final : public PoolKernel {
 public:
  DnnlPool(DnnlContext* ctx, const PoolSpec& s, dnnl::algorithm alg) : ctx_(ctx), s_(s), alg_(alg) {}

  void Forward(int n, const float* x, float* y, bool training) override {
    Prims& p = Get(n);
    if (training && alg_ == dnnl::algorithm::pooling_max) {
      void* ws = Scratch(workspace_, p.train_pd.workspace_desc().get_size());
      p.train.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.x, ctx_, x)},
                                     {DNNL_ARG_DST, Mem(p.y, ctx_, y)},
                                     {DNNL_ARG_WORKSPACE, Mem(p.train_pd.workspace_desc(), ctx_, ws)}});
    } else {
      p.infer.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.x, ctx_, x)}, {DNNL_ARG_DST, Mem(p.y, ctx_, y)}});
    }
    ctx_->stream.wait();
  }

  void Backward(int n, const float*, const float*, const float* dy, float* dx) override {
    Prims& p = Get(n);
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, Mem(p.y, ctx_, dy)}, {DNNL_ARG_DIFF_SRC, Mem(p.x, ctx_, dx)}};
    if (alg_ == dnnl::algorithm::pooling_max)
      args.emplace(DNNL_ARG_WORKSPACE, Mem(p.train_pd.workspace_desc(), ctx_, workspace_.data()));
    p.bwd.execute(ctx_->stream, args);
    ctx_->stream.wait();
  }

 private:
  struct Prims {
    memory::desc x, y;
    dnnl::pooling_forward::primitive_desc train_pd;
    dnnl::pooling_forward train, infer;
    dnnl::pooling_backward bwd;
  };

  Prims& Get(int n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    Prims p;
    const memory::dim N = n, C = s_.channels;
    p.x = memory::desc({N, C, s_.in_h, s_.in_w}, dt::f32, tag::nhwc);
    p.y = memory::desc({N, C, s_.out_h(), s_.out_w()}, dt::f32, tag::nhwc);
    memory::dims k{s_.size, s_.size}, st{s_.stride, s_.stride}, pad{0, 0};
    const dnnl::algorithm alg = alg_;
    p.train_pd = dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, p.x, p.y, st, k, pad, pad), ctx_->engine);
    p.train = dnnl::pooling_forward(p.train_pd);
    p.infer = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, alg, p.x, p.y, st, k, pad, pad),
        ctx_->engine));
    p.bwd = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(alg, p.x, p.y, st, k, pad, pad), ctx_->engine, p.train_pd));
    return cache_.emplace(n, std::move(p)).first->second;
  }

  DnnlContext* ctx_;
  PoolSpec s_;
  dnnl::algorithm alg_;
  std::map<int, Prims> cache_;
  std::vector<float> workspace_;
};

// ----------------------------------------------------------- batch norm ----
class DnnlBatchNorm final : public BatchNormKernel {
 public:
  DnnlBatchNorm(DnnlContext* ctx, const BatchNormSpec& s)
      : ctx_(ctx), s_(s), mean_(size_t(s.channels)), var_(size_t(s.channels)) {}

  void Forward(int n, const float* x, const float* gamma, const float* beta, float* moving_mean, float* moving_var,
               float* y, bool training) override {
    Prims& p = Get(n);
    const float* mean = training ? mean_.data() : moving_mean;
    const float* var = training ? var_.data() : moving_var;
    (training ? p.train : p.infer)
        .execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.x, ctx_, x)},
                                {DNNL_ARG_DST, Mem(p.x, ctx_, y)},
                                {DNNL_ARG_SCALE, Mem(p.c, ctx_, gamma)},
                                {DNNL_ARG_SHIFT, Mem(p.c, ctx_, beta)},
                                {DNNL_ARG_MEAN, Mem(p.c, ctx_, mean)},
                                {DNNL_ARG_VARIANCE, Mem(p.c, ctx_, var)}});
    ctx_->stream.wait();
    if (training) {
      const double m = double(n) * s_.h * s_.w;
      const float bessel = m > 1 ? float(m / (m - 1)) : 1.f;
      for (int c = 0; c < s_.channels; ++c) {
        moving_mean[c] = s_.momentum * moving_mean[c] + (1 - s_.momentum) * mean_[c];
        moving_var[c] = s_.momentum * moving_var[c] + (1 - s_.momentum) * var_[c] * bessel;
      }
    }
  }

  void Backward(int n, const float* x, const float* dy, const float* gamma, const float* beta, float* dx,
                float* dgamma, float* dbeta) override {
    Prims& p = Get(n);
    p.bwd.execute(ctx_->stream, {{DNNL_ARG_SRC, Mem(p.x, ctx_, x)},
                                 {DNNL_ARG_DIFF_DST, Mem(p.x, ctx_, dy)},
                                 {DNNL_ARG_MEAN, Mem(p.c, ctx_, mean_.data())},
                                 {DNNL_ARG_VARIANCE, Mem(p.c, ctx_, var_.data())},
                                 {DNNL_ARG_SCALE, Mem(p.c, ctx_, gamma)},
                                 {DNNL_ARG_SHIFT, Mem(p.c, ctx_, beta)},
                                 {DNNL_ARG_DIFF_SRC, Mem(p.x, ctx_, dx)},
                                 {DNNL_ARG_DIFF_SCALE, Mem(p.c, ctx_, dgamma)},
                                 {DNNL_ARG_DIFF_SHIFT, Mem(p.c, ctx_, dbeta)}});
    ctx_->stream.wait();
  }

 private:
  struct Prims {
    memory::desc x, c;
    dnnl::batch_normalization_forward train, infer;
    dnnl::batch_normalization_backward bwd;
  };

  Prims& Get(int n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    using flags = dnnl::normalization_flags;
    Prims p;
    p.x = memory::desc({n, s_.channels, s_.h, s_.w}, dt::f32, tag::nhwc);
    p.c = memory::desc({s_.channels}, dt::f32, tag::a);
    const flags f = flags::use_scale | flags::use_shift;
    dnnl::batch_normalization_forward::primitive_desc train_pd(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, p.x, s_.epsilon, f),
        ctx_->engine);
    p.train = dnnl::batch_normalization_forward(train_pd);
    p.infer = dnnl::batch_normalization_forward(dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, p.x, s_.epsilon,
                                                f | flags::use_global_stats),
        ctx_->engine));
    p.bwd = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, p.x, p.x, s_.epsilon, f), ctx_->engine,
        train_pd));
    return cache_.emplace(n, std::move(p)).first->second;
  }

  DnnlContext* ctx_;
  BatchNormSpec s_;
  std::map<int, Prims> cache_;
  std::vector<float> mean_, var_;  // statistics of the last training batch
};

}  // namespace

bool DnnlIsaHasBf16(unsigned isa) {
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & need) == need;
}

Status CheckCpuBackendPrecision(Precision precision) {
  MIRRORED_RETURN_IF_ERROR(CheckCpuPrecision(precision));
  if (precision != Precision::kBf16) return OkStatus();
  const auto have = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  if (DnnlIsaHasBf16(have)) return OkStatus();
  std::string cap;
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && cap.empty()) cap = std::string(name) + "=" + v + " caps it";
  }
  std::ostringstream isa;
  isa << "0x" << std::hex << have;
  return InvalidArgumentError(
      "--precision bf16: this CPU reports AVX512_BF16, but oneDNN's effective instruction set (dnnl_cpu_isa_t " +
      isa.str() + ") lacks it (" + (cap.empty() ? "the OS may not enable AVX-512 state" : cap) +
      "), and mirrored does not emulate bf16: " +
      (cap.empty() ? "use --precision fp32" : "unset it, or use --precision fp32"));
}

std::unique_ptr<DenseKernel> MakeDnnlDense(DnnlContext* ctx, const DenseSpec& spec) {
  return std::make_unique<DnnlDense>(ctx, spec, ctx->bf16());
}
std::unique_ptr<ConvKernel> MakeDnnlConv(DnnlContext* ctx, const ConvSpec& spec, ConvWeightGradient dw) {
  if (spec.kernel == 1 && !spec.padded()) return std::make_unique<DnnlPointwiseConv>(ctx, spec);
  return std::make_unique<DnnlConv>(ctx, spec, dw);
}
std::unique_ptr<PoolKernel> MakeDnnlMaxPool(DnnlContext* ctx, const PoolSpec& spec) {
  return std::make_unique<DnnlPool>(ctx, spec, dnnl::algorithm::pooling_max);
}
std::unique_ptr<PoolKernel> MakeDnnlAvgPool(DnnlContext* ctx, const PoolSpec& spec) {
  return std::make_unique<DnnlPool>(ctx, spec, dnnl::algorithm::pooling_avg_exclude_padding);
}
std::unique_ptr<BatchNormKernel> MakeDnnlBatchNorm(DnnlContext* ctx, const BatchNormSpec& spec) {
  return std::make_unique<DnnlBatchNorm>(ctx, spec);
}

}  // namespace mirrored::model
