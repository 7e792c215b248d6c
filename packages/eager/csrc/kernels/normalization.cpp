// The statistics that layer and batch norm save for their backward follow
// CUDA's conventions, which PyTorch's meta kernels and decompositions (and so
// torch.compile) assume for every device but the CPU:
// - float16/bfloat16 layer norm saves float32 mean and rstd (the CPU: rounded
//   to the input's dtype);
// - float16/bfloat16 batch norm saves float32 statistics too (the CPU: of the
//   input's dtype, unless its weights are float32);
// - batch norm in eval mode saves the running mean and 1/sqrt(running_var +
//   eps) per channel (the CPU saves empty tensors).
// The CPU kernels do the work, on float16/bfloat16 inputs widened to float32 as
// CUDA's kernels widen each element, which also makes their backward, whose CPU
// kernels want statistics of the input's dtype, read float32 ones.
#include <ATen/ATen.h>
#include <ATen/AccumulateType.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_batch_norm_with_update_ops.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"
#include "openreg/glue/launch.h"

namespace openreg::eager {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using Three = std::tuple<Tensor, Tensor, Tensor>;

bool reduced_float(const Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

OptTensor widened(const OptTensor& t) { return t && t->defined() ? OptTensor(t->to(at::kFloat)) : t; }

Tensor narrowed(const Tensor& t, const OptTensor& like) {
  return t.defined() && like && like->defined() ? t.to(like->scalar_type()) : t;
}

Three layer_norm(const Tensor& input, c10::SymIntArrayRef shape, const OptTensor& weight, const OptTensor& bias,
                 double eps) {
  if (!reduced_float(input)) return run_hot<at::_ops::native_layer_norm>(input, shape, weight, bias, eps);
  auto [out, mean, rstd] =
      run_hot<at::_ops::native_layer_norm>(input.to(at::kFloat), shape, widened(weight), widened(bias), eps);
  return {out.to(input.scalar_type()), mean, rstd};
}

Three layer_norm_backward(const Tensor& grad_out, const Tensor& input, c10::SymIntArrayRef shape, const Tensor& mean,
                          const Tensor& rstd, const OptTensor& weight, const OptTensor& bias,
                          std::array<bool, 3> mask) {
  if (!reduced_float(input)) {
    return run_hot<at::_ops::native_layer_norm_backward>(grad_out, input, shape, mean, rstd, weight, bias, mask);
  }
  auto [grad_input, grad_weight, grad_bias] = run_hot<at::_ops::native_layer_norm_backward>(
      grad_out.to(at::kFloat), input.to(at::kFloat), shape, mean.to(at::kFloat), rstd.to(at::kFloat), widened(weight),
      widened(bias), mask);
  return {narrowed(grad_input, input), narrowed(grad_weight, weight), narrowed(grad_bias, bias)};
}

// `run` calls one of the batch norms below (whose running statistics are
// optional, required or absent). float16/bfloat16 inputs run widened to
// float32, whose kernel saves float32 statistics; running statistics of the
// narrow type get their update back.
template <class Run>
auto widened_batch_norm(const Run& run, const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, bool training) {
  if (training) {  // native_batch_norm's schema does not mark them written, as the generic kernel would need
    glue::materialize_for_write(running_mean);
    glue::materialize_for_write(running_var);
  }
  if (!reduced_float(input)) return run(input, weight, bias, running_mean, running_var);
  const Tensor mean = widened(running_mean).value_or(Tensor()), var = widened(running_var).value_or(Tensor());
  auto result = run(input.to(at::kFloat), widened(weight), widened(bias), mean, var);
  std::get<0>(result) = std::get<0>(result).to(input.scalar_type());
  if (training && running_mean.defined() && !running_mean.is_same(mean)) {
    running_mean.copy_(mean);
    running_var.copy_(var);
  }
  return result;
}

bool saves_running_stats(bool training, const Tensor& running_mean, const Tensor& running_var) {
  return !training && running_mean.defined() && running_var.defined();
}

// What CUDA saves in eval mode: the running mean and 1/sqrt(running_var + eps), in the accumulate type.
std::pair<Tensor, Tensor> saved_running_stats(const Tensor& input, const Tensor& running_mean,
                                              const Tensor& running_var, double eps) {
  const auto acc = at::toAccumulateType(input.scalar_type(), c10::DeviceType::CUDA);
  return {running_mean.to(acc, /*non_blocking=*/false, /*copy=*/true), running_var.to(acc).add(eps).rsqrt()};
}

// In eval mode the CPU kernel has computed the output (on the host: its empty
// statistics differ from the meta kernel's); the statistics are CUDA's.
Three with_saved_running_stats(Three result, const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                               bool training, double eps) {
  if (!saves_running_stats(training, running_mean, running_var)) return result;
  auto [mean, invstd] = saved_running_stats(input, running_mean, running_var, eps);
  return {std::move(std::get<0>(result)), std::move(mean), std::move(invstd)};
}

// The out= forms: the CPU kernel checks the out= tensors and writes the output; CUDA's writes eval mode's
// statistics into them as well, as the functional form returns them.
using ThreeOut = std::tuple<Tensor&, Tensor&, Tensor&>;

ThreeOut with_saved_running_stats(ThreeOut result, const Tensor& input, const Tensor& running_mean,
                                  const Tensor& running_var, bool training, double eps) {
  if (!saves_running_stats(training, running_mean, running_var)) return result;
  auto [mean, invstd] = saved_running_stats(input, running_mean, running_var, eps);
  for (auto [out, saved] : {std::pair{&std::get<1>(result), &mean}, std::pair{&std::get<2>(result), &invstd}}) {
    at::native::resize_output(*out, saved->sizes());
    out->copy_(*saved);
  }
  return result;
}

OptTensor optional(const Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

Three batch_norm(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const OptTensor& running_mean,
                 const OptTensor& running_var, bool training, double momentum, double eps) {
  const Tensor mean = running_mean.value_or(Tensor()), var = running_var.value_or(Tensor());
  auto run = [&](const Tensor& x, const OptTensor& w, const OptTensor& b, const Tensor& m, const Tensor& v) {
    return run_hot<at::_ops::native_batch_norm>(x, w, b, optional(m), optional(v), training, momentum, eps);
  };
  return with_saved_running_stats(widened_batch_norm(run, input, weight, bias, mean, var, training), input, mean, var,
                                  training, eps);
}

Three batch_norm_legit(const Tensor& input, const OptTensor& weight, const OptTensor& bias, Tensor& running_mean,
                       Tensor& running_var, bool training, double momentum, double eps) {
  auto run = [&](const Tensor& x, const OptTensor& w, const OptTensor& b, Tensor m, Tensor v) {
    return run_hot<at::_ops::_native_batch_norm_legit>(x, w, b, m, v, training, momentum, eps);
  };
  return with_saved_running_stats(widened_batch_norm(run, input, weight, bias, running_mean, running_var, training),
                                  input, running_mean, running_var, training, eps);
}

ThreeOut batch_norm_out(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                        const OptTensor& running_mean, const OptTensor& running_var, bool training, double momentum,
                        double eps, Tensor& out, Tensor& save_mean, Tensor& save_invstd) {
  return with_saved_running_stats(
      run_hot<at::_ops::native_batch_norm_out>(input, weight, bias, running_mean, running_var, training, momentum, eps,
                                               out, save_mean, save_invstd),
      input, running_mean.value_or(Tensor()), running_var.value_or(Tensor()), training, eps);
}

ThreeOut batch_norm_legit_out(const Tensor& input, const OptTensor& weight, const OptTensor& bias, Tensor& running_mean,
                              Tensor& running_var, bool training, double momentum, double eps, Tensor& out,
                              Tensor& save_mean, Tensor& save_invstd) {
  return with_saved_running_stats(
      run_hot<at::_ops::_native_batch_norm_legit_out>(input, weight, bias, running_mean, running_var, training,
                                                      momentum, eps, out, save_mean, save_invstd),
      input, running_mean, running_var, training, eps);
}

Three batch_norm_legit_no_stats(const Tensor& input, const OptTensor& weight, const OptTensor& bias, bool training,
                                double momentum, double eps) {
  auto run = [&](const Tensor& x, const OptTensor& w, const OptTensor& b, const Tensor&, const Tensor&) {
    return run_hot<at::_ops::_native_batch_norm_legit_no_stats>(x, w, b, training, momentum, eps);
  };
  return widened_batch_norm(run, input, weight, bias, Tensor(), Tensor(), training);
}

using Four = std::tuple<Tensor, Tensor, Tensor, Tensor>;

Four batch_norm_with_update(const Tensor& input, const OptTensor& weight, const OptTensor& bias, Tensor& running_mean,
                            Tensor& running_var, double momentum, double eps) {
  auto run = [&](const Tensor& x, const OptTensor& w, const OptTensor& b, Tensor m, Tensor v) {
    return run_hot<at::_ops::_batch_norm_with_update>(x, w, b, m, v, momentum, eps);
  };
  return widened_batch_norm(run, input, weight, bias, running_mean, running_var, /*training=*/true);
}

// Its composite kernel calls the CPU's batch norm directly, refusing other devices.
Four batch_norm_no_update(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                          const OptTensor& running_mean, const OptTensor& running_var, double momentum, double eps) {
  auto [out, mean, invstd] = batch_norm(input, weight, bias, running_mean, running_var, false, momentum, eps);
  return {out, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

// The backwards, widened as their forwards were.
template <class Run>
Three widened_batch_norm_backward(const Run& run, const Tensor& grad_out, const Tensor& input, const OptTensor& weight,
                                  const OptTensor& running_mean, const OptTensor& running_var,
                                  const OptTensor& save_mean, const OptTensor& save_invstd) {
  if (!reduced_float(input)) return run(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd);
  auto [grad_input, grad_weight, grad_bias] =
      run(grad_out.to(at::kFloat), input.to(at::kFloat), widened(weight), widened(running_mean), widened(running_var),
          widened(save_mean), widened(save_invstd));
  return {narrowed(grad_input, input), narrowed(grad_weight, weight), narrowed(grad_bias, weight)};
}

Three native_batch_norm_backward(const Tensor& grad_out, const Tensor& input, const OptTensor& weight,
                                 const OptTensor& running_mean, const OptTensor& running_var,
                                 const OptTensor& save_mean, const OptTensor& save_invstd, bool train, double eps,
                                 std::array<bool, 3> mask) {
  auto run = [&](const Tensor& g, const Tensor& x, const OptTensor& w, const OptTensor& rm, const OptTensor& rv,
                 const OptTensor& sm, const OptTensor& si) {
    return run_hot<at::_ops::native_batch_norm_backward>(g, x, w, rm, rv, sm, si, train, eps, mask);
  };
  return widened_batch_norm_backward(run, grad_out, input, weight, running_mean, running_var, save_mean, save_invstd);
}

Three batch_norm_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                          const OptTensor& running_mean, const OptTensor& running_var, const OptTensor& save_mean,
                          const OptTensor& save_var, bool update, double eps, std::array<bool, 3> mask,
                          const Tensor& reserve) {
  auto run = [&](const Tensor& g, const Tensor& x, const OptTensor& w, const OptTensor& rm, const OptTensor& rv,
                 const OptTensor& sm, const OptTensor& sv) {
    return run_hot<at::_ops::batch_norm_backward>(g, x, w.value_or(Tensor()), rm, rv, sm, sv, update, eps, mask,
                                                  reserve);
  };
  return widened_batch_norm_backward(run, grad_out, input, weight, running_mean, running_var, save_mean, save_var);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", &layer_norm);
  m.impl("native_layer_norm_backward", &layer_norm_backward);
  m.impl("native_batch_norm", &batch_norm);
  m.impl("native_batch_norm.out", &batch_norm_out);
  m.impl("_native_batch_norm_legit", &batch_norm_legit);
  m.impl("_native_batch_norm_legit.out", &batch_norm_legit_out);
  m.impl("_native_batch_norm_legit.no_stats", &batch_norm_legit_no_stats);
  m.impl("_batch_norm_with_update", &batch_norm_with_update);
  m.impl("_batch_norm_no_update", &batch_norm_no_update);
  m.impl("native_batch_norm_backward", &native_batch_norm_backward);
  m.impl("batch_norm_backward", &batch_norm_backward);
}

}  // namespace openreg::eager
