// scaled_dot_product_attention on openreg takes SDPBackend::overrideable, the
// backend PyTorch leaves to an accelerator's own fused kernel (as upstream's
// OpenReg test backend does). The forward keeps the softmax's logsumexp, not
// its probabilities; the backward recomputes them from it and redraws the
// dropout mask from the seed the forward kept, as flash attention does. Both
// are composed of ATen ops on openreg tensors: each step is a kernel on the
// stream, on device memory. Inputs this kernel does not take get the math
// backend, as CUDA's do when no fused kernel applies.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "openreg/glue/generator.h"

namespace openreg::eager {
namespace {

using at::Tensor;
using sdp::SDPBackend;

bool supported(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask, bool debug) {
  auto reject = [debug](const char* why) {
    if (debug) TORCH_WARN("openreg's fused attention (OVERRIDEABLE) not used: ", why);
    return false;
  };
  if (q.is_nested() || k.is_nested() || v.is_nested()) return reject("nested tensors");
  const int64_t dim = q.dim();
  // torch's meta kernel for the op lays out 3-D and 4-D inputs only.
  if ((dim != 3 && dim != 4) || k.dim() != dim || v.dim() != dim) {
    return reject("query, key, value are not all 3-D or 4-D");
  }
  const auto type = q.scalar_type();
  // The logsumexp output is float32 (the op's meta): too coarse to recompute double probabilities.
  if (type != at::kFloat && type != at::kHalf && type != at::kBFloat16) {
    return reject("dtype is not float32, float16 or bfloat16");
  }
  // The op has no enable_gqa: grouped-query attention and broadcast batches stay with math.
  const auto batch = q.sym_sizes().slice(0, dim - 2);
  if (!batch.equals(k.sym_sizes().slice(0, dim - 2)) || !batch.equals(v.sym_sizes().slice(0, dim - 2))) {
    return reject("query, key and value differ in batch or head sizes");
  }
  if (q.sym_size(-1) != k.sym_size(-1) || k.sym_size(-2) != v.sym_size(-2)) {
    return reject("query's and key's head sizes, or key's and value's lengths, differ");
  }
  // An unbacked size (a data-dependent batch under torch.export) is taken as
  // non-empty rather than guarded on, as upstream's choice does.
  auto empty = [](const Tensor& t) { return TORCH_GUARD_OR_FALSE(t.sym_numel().sym_eq(0)); };
  if (empty(q) || empty(k) || empty(v)) return reject("an input is empty");
  // The meta kernel lays out a 3-D output only in query's own shape.
  if (dim == 3 && v.sym_size(-1) != q.sym_size(-1)) return reject("3-D value's head size differs from query's");
  if (mask && mask->defined() && mask->dim() > dim) return reject("attn_mask has more dimensions than query");
  return true;
}

// Like CUDA's choice: the fused kernel if enabled and applicable, else math if
// enabled, else the reasons and an error. The order is fixed, as on the CPU:
// the global priority list ranks math above overrideable by default.
int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                         double /*dropout_p*/, bool /*is_causal*/, std::optional<double> /*scale*/,
                         bool /*enable_gqa*/) {
  auto& ctx = at::globalContext();
  // With both of openreg's backends off, CUDA's and the CPU's error for theirs.
  TORCH_CHECK(ctx.userEnabledOverrideableSDP() || ctx.userEnabledMathSDP(),
              "No viable backend for scaled_dot_product_attention was found. This is likely due to turning off both "
              "the math kernel and the fused kernels.");
  if (ctx.userEnabledOverrideableSDP() && supported(q, k, v, mask, false)) {
    return static_cast<int64_t>(SDPBackend::overrideable);
  }
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(SDPBackend::math);
  if (ctx.userEnabledOverrideableSDP()) supported(q, k, v, mask, true);
  TORCH_CHECK(false, "No available kernel. Aborting execution.");
  return static_cast<int64_t>(SDPBackend::error);
}

double scale_of(const Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// Scores in float32; each factor takes √|scale| as the math backend's do.
Tensor scores(const Tensor& q, const Tensor& k, const Tensor& bias, bool is_causal, double scale) {
  const double root = std::sqrt(std::abs(scale));
  Tensor s = at::matmul(q.to(at::kFloat) * (scale < 0 ? -root : root), k.to(at::kFloat).transpose(-2, -1) * root);
  if (bias.defined()) s.add_(bias);
  if (is_causal) {
    s.add_(at::full({s.size(-2), s.size(-1)}, -std::numeric_limits<float>::infinity(), s.options()).triu(1));
  }
  return s;
}

// Not s.logsumexp(-1): on openreg that op runs at the call, waiting for the
// stream, every time. A fully masked row gets -inf.
Tensor logsumexp(const Tensor& s) {
  Tensor max = s.amax(-1, true);
  max.masked_fill_(max.isneginf(), 0);
  return at::exp(s - max).sum(-1).log_().add_(max.squeeze(-1));
}

// A fully masked row has logsumexp -inf and, as in the math backend, zeros.
Tensor probabilities(const Tensor& s, const Tensor& lse) {
  return at::exp(s - lse.masked_fill(lse.isneginf(), 0).unsqueeze(-1));
}

// A fresh generator from the kept seed, so the backward draws the forward's mask.
Tensor dropout_scale(const Tensor& like, double p, uint64_t seed) {
  // Seeded as made: seeding an existing generator is refused during a graph capture. Its own state is registered
  // with a capture underway, so that each replay draws a new mask (and the backward, at the same replay, the same).
  at::Generator gen = at::make_generator<glue::Generator>(like.device().index(), seed);
  gen.get<glue::Generator>()->begin_capture();
  const double keep = 1.0 - p;
  return at::empty_like(like, at::MemoryFormat::Contiguous).bernoulli_(keep, gen).mul_(keep == 0.0 ? 0.0 : 1.0 / keep);
}

uint64_t draw_seed(const Tensor& like) {
  auto* gen = glue::default_generator(like.device().index()).get<glue::Generator>();
  return gen->take_launch().get<at::CPUGeneratorImpl>()->random64();
}

// `value` in `target`'s layout and dtype: the layouts torch's meta kernels give,
// which compiled graphs plan around.
Tensor into(const Tensor& target, const Tensor& value) {
  if (target.strides() == value.strides() && target.dtype() == value.dtype()) return value;
  return target.copy_(value);
}

// The meta kernel's alloc_with_matching_layout: query's dimension order.
Tensor output_layout(const Tensor& q, int64_t head_dim_v) {
  if (q.size(-1) == head_dim_v) return at::empty_like(q);
  std::vector<int64_t> shape = q.sizes().vec(), order(q.dim()), strides(q.dim());
  shape.back() = head_dim_v;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= shape[*it];
  }
  return at::empty_strided(shape, strides, q.options());
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> forward(
    const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_bias, double dropout_p,
    bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(q.dim() == 3 || q.dim() == 4, "openreg's fused attention takes 3-D or 4-D inputs, got ", q.dim(), "-D");
  const auto type = q.scalar_type();
  TORCH_CHECK(type == at::kFloat || type == at::kHalf || type == at::kBFloat16,
              "openreg's fused attention takes float32, float16 or bfloat16, got ", type);
  TORCH_CHECK(q.sizes().slice(0, q.dim() - 2) == k.sizes().slice(0, k.dim() - 2) &&
                  k.sizes().slice(0, k.dim() - 2) == v.sizes().slice(0, v.dim() - 2),
              "openreg's fused attention takes query, key and value of the same batch and head sizes");
  const Tensor bias = attn_bias.value_or(Tensor());
  Tensor s = scores(q, k, bias, is_causal, scale_of(q, scale));
  Tensor lse = logsumexp(s);
  Tensor p = probabilities(s, lse);
  Tensor seed = at::zeros({}, at::kLong), offset = at::zeros({}, at::kLong);
  if (dropout_p > 0.0) {
    // The math backend's check (at::dropout's), which takes a negative p as no dropout.
    TORCH_CHECK(dropout_p <= 1.0, "dropout probability has to be between 0 and 1, but got ", dropout_p);
    const uint64_t drawn = draw_seed(q);
    seed.fill_(static_cast<int64_t>(drawn));
    p.mul_(dropout_scale(p, dropout_p, drawn));
  }
  Tensor out = into(output_layout(q, v.size(-1)), at::matmul(p, v.to(at::kFloat)));
  if (q.dim() == 3) lse = lse.unsqueeze(0);
  return {out,
          lse,
          Tensor(),
          Tensor(),
          c10::SymInt(q.size(-2)),
          c10::SymInt(k.size(-2)),
          seed,
          offset,
          return_debug_mask ? p.to(type) : Tensor()};
}

// Every gradient comes back whatever grad_input_mask asks, as torch's meta kernel
// promises compiled graphs.
std::tuple<Tensor, Tensor, Tensor, Tensor> backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                                    const Tensor& v, const Tensor& bias,
                                                    std::array<bool, 4> /*grad_input_mask*/, const Tensor& /*out*/,
                                                    const Tensor& logsumexp, const Tensor& /*cum_seq_q*/,
                                                    const Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/,
                                                    c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
                                                    const Tensor& philox_seed, const Tensor& /*philox_offset*/,
                                                    std::optional<double> scale) {
  if (!grad_out.defined()) return {};
  const double sc = scale_of(q, scale);
  Tensor s = scores(q, k, bias, is_causal, sc);
  Tensor p = probabilities(s, logsumexp.reshape(q.sizes().slice(0, q.dim() - 1)));
  Tensor go = grad_out.to(at::kFloat), vf = v.to(at::kFloat);
  Tensor dp = at::matmul(go, vf.transpose(-2, -1));
  Tensor kept = p;
  if (dropout_p > 0.0) {
    Tensor mask = dropout_scale(p, dropout_p, static_cast<uint64_t>(philox_seed.item<int64_t>()));
    kept = p * mask;
    dp.mul_(mask);
  }
  Tensor grad_v = at::matmul(kept.transpose(-2, -1), go);
  Tensor ds = p * (dp - (dp * p).sum(-1, true));
  Tensor grad_q = at::matmul(ds, k.to(at::kFloat)).mul_(sc);
  Tensor grad_k = at::matmul(ds.transpose(-2, -1), q.to(at::kFloat)).mul_(sc);
  Tensor grad_bias = bias.defined() ? into(at::empty_like(bias), ds.sum_to_size(bias.sizes())) : Tensor();
  return {into(at::empty_like(q), grad_q), into(at::empty_like(k), grad_k), into(at::empty_like(v), grad_v), grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", &fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", &forward);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", &backward);
}

}  // namespace openreg::eager

// scaled_dot_product_attention asks this stub, not the op above.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &openreg::eager::fused_sdp_choice)
}  // namespace at::native
