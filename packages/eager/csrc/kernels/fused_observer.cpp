// QAT's fused observer (fused_moving_avg_obs_fake_quant) in float16 and
// bfloat16, which CUDA's kernel takes and the CPU's refuses. CUDA keeps the
// running minimum and maximum in the input's dtype, rounding after each
// operation of the moving average (its averaging constant rounded too), and
// chooses the scale and zero point from those rounded values in float and
// double; openreg does the same with the device's ops, queued, reading the
// observer and fake-quantization switches on the device as CUDA does. float32
// and float64 inputs take the CPU's kernel through the generic one.
#include <ATen/ATen.h>
#include <ATen/ops/_fused_moving_avg_obs_fq_helper_ops.h>
#include <torch/library.h>

#include <limits>
#include <numeric>
#include <tuple>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

using Observed = std::tuple<at::Tensor, at::Tensor>;

void check_dtype(const at::Tensor& running, const at::Tensor& x) {
  TORCH_CHECK(running.scalar_type() == x.scalar_type(), "expected scalar type ", x.scalar_type(), " but found ",
              running.scalar_type());
}

// running = running + c * (current - running) in the running dtype, or current where running is still infinite.
void move(const at::Tensor& running, const at::Tensor& current, const at::Tensor& observing, double averaging_const) {
  const double c = at::scalar_tensor(averaging_const, at::TensorOptions().dtype(running.scalar_type())).item<double>();
  const at::Tensor moved = running.add(current.sub(running).mul(c));
  running.copy_(at::where(observing, at::where(running.isinf(), current, moved), running));
}

// CUDA's ChooseQuantizationParamsKernelImpl, element by element: float bounds, double arithmetic, float scale.
std::tuple<at::Tensor, at::Tensor> choose_qparams(const at::Tensor& running_min, const at::Tensor& running_max,
                                                  int64_t qmin, int64_t qmax, bool symmetric) {
  at::Tensor lo = running_min.to(at::kFloat), hi = running_max.to(at::kFloat);
  const at::Tensor straddles = lo.lt(0).logical_and(hi.gt(0));
  if (symmetric) {
    const int64_t sym_min = -((qmax - qmin) / 2 + 1), sym_max = (qmax - qmin) / 2;
    const at::Tensor max_scale = at::maximum(lo.div(sym_min).abs(), hi.div(sym_max).abs()).to(at::kDouble);
    lo = at::where(straddles, max_scale.mul(sym_min).to(at::kFloat), lo);
    hi = at::where(straddles, max_scale.mul(sym_max).to(at::kFloat), hi);
  }
  lo = lo.clamp_max(0).to(at::kDouble);
  hi = hi.clamp_min(0).to(at::kDouble);
  at::Tensor scale = hi.sub(lo).div(qmax - qmin).to(at::kFloat);
  scale =
      at::where(scale.eq(0).logical_or(scale.reciprocal().isinf()), at::scalar_tensor(0.1f, scale.options()), scale);
  const at::Tensor s = scale.to(at::kDouble);
  const at::Tensor from_min = lo.div(s).neg().add(qmin), from_max = hi.div(s).neg().add(qmax);
  const at::Tensor min_error = lo.div(s).abs().add(std::abs(qmin)), max_error = hi.div(s).abs().add(std::abs(qmax));
  at::Tensor zero_point = at::where(min_error.lt(max_error), from_min, from_max);
  if (symmetric) zero_point = at::where(straddles, static_cast<double>(qmin + qmax) / 2, zero_point);
  zero_point = at::where(zero_point.lt(qmin), qmin, at::where(zero_point.gt(qmax), qmax, zero_point.round()));
  return {scale, zero_point.to(at::kInt)};
}

Observed observe(const at::Tensor& x, const at::Tensor& observer_on, const at::Tensor& fake_quant_on,
                 at::Tensor& running_min, at::Tensor& running_max, at::Tensor& scale, at::Tensor& zero_point,
                 double averaging_const, int64_t qmin, int64_t qmax, int64_t ch_axis, bool per_row, bool symmetric) {
  if (x.scalar_type() != at::kHalf && x.scalar_type() != at::kBFloat16) {
    return run_hot<at::_ops::_fused_moving_avg_obs_fq_helper>(x, observer_on, fake_quant_on, running_min, running_max,
                                                              scale, zero_point, averaging_const, qmin, qmax, ch_axis,
                                                              per_row, symmetric);
  }
  TORCH_CHECK(ch_axis < x.dim(), "Error in fused_moving_avg_obs_fake_quant_cpu: ch_axis must be < self.dim()");
  at::Tensor x_min, x_max;
  if (per_row) {
    at::Tensor rows = x;
    if (x.dim() != 2) {
      std::vector<int64_t> order(x.dim());
      std::iota(order.begin(), order.end(), 0);
      std::swap(order[0], order[ch_axis]);
      rows = x.permute(order).flatten(1);
    }
    if (running_min.numel() == 0) {
      const int64_t channels = x.size(ch_axis);
      running_min.resize_(channels).fill_(std::numeric_limits<float>::infinity());
      running_max.resize_(channels).fill_(-std::numeric_limits<float>::infinity());
      scale.resize_(channels);
      zero_point.resize_(channels);
    }
    std::tie(x_min, x_max) = at::aminmax(rows, 1);
  } else {
    std::tie(x_min, x_max) = at::aminmax(x.contiguous());
  }
  check_dtype(running_min, x);
  check_dtype(running_max, x);
  const at::Tensor observing = observer_on.to(at::kLong).eq(1);
  move(running_min, x_min, observing, averaging_const);
  move(running_max, x_max, observing, averaging_const);
  const at::Tensor quantizing = fake_quant_on.to(at::kLong), quantizing_now = quantizing.eq(1);
  const auto [new_scale, new_zero_point] = choose_qparams(running_min, running_max, qmin, qmax, symmetric);
  scale.copy_(at::where(quantizing_now, new_scale, scale));
  zero_point.copy_(at::where(quantizing_now, new_zero_point, zero_point));
  if (!per_row) {
    return at::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams(x, scale, zero_point, quantizing, qmin, qmax);
  }
  if (quantizing.item<int64_t>() != 0) {  // on the host, as CUDA's kernel reads it
    return at::fake_quantize_per_channel_affine_cachemask(x, scale, zero_point, 0, qmin, qmax);
  }
  return {x.clone(), at::ones_like(x, at::kBool, at::MemoryFormat::Preserve)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_fused_moving_avg_obs_fq_helper", TORCH_FN(observe)); }

}  // namespace openreg::eager
