// Quantized ops that only make or inspect a quantized tensor (its storage and
// quantizer): ATen's kernels for them work on any device, so they run here
// without synchronising. Everything else reaches layouts/layout_kernel.cpp,
// which registers these first.
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/dequantize_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/set_native.h>
#include <torch/library.h>

#include "../layouts/on_named_device.h"
#include "../layouts/registration.h"

namespace openreg::eager {

void register_quantized_structure(torch::Library& quantized, torch::Library& dense) {
  quantized.impl("q_scale", &at::native::q_scale_quant);
  quantized.impl("q_zero_point", &at::native::q_zero_point_quant);
  quantized.impl("q_per_channel_scales", &at::native::q_per_channel_scales);
  quantized.impl("q_per_channel_zero_points", &at::native::q_per_channel_zero_points);
  quantized.impl("q_per_channel_axis", &at::native::q_per_channel_axis);
  quantized.impl("qscheme", &at::native::qscheme_quant);
  // torch.load and deepcopy rebuild a quantized tensor on its storage's device.
  quantized.impl("set_.source_Storage_storage_offset", &at::native::set_storage_quantized_);
  quantized.impl("empty.memory_format", &OnNamedDevice<&at::native::empty_unknown_quantized>::call);
  quantized.impl("empty_like", &OnNamedDevice<&at::native::empty_like_quantized>::call);
  quantized.impl("empty_quantized", &OnNamedDevice<&at::native::empty_quantized>::call);
  quantized.impl("_empty_affine_quantized", &OnNamedDevice<&at::native::empty_affine_quantized>::call);
  quantized.impl("_empty_per_channel_affine_quantized",
                 &OnNamedDevice<&at::native::empty_per_channel_affine_quantized>::call);
  // A factory given a dtype that is not quantized (or none) reaches the dense key: the CPU's kernel for it
  // raises, and so does openreg's (q.to(torch.float32) asks _to_copy for a quantized float tensor).
  dense.impl("_empty_affine_quantized", &at::native::empty_affine_quantized_other_backends_stub);
  dense.impl("_empty_per_channel_affine_quantized",
             &at::native::empty_per_channel_affine_quantized_other_backends_stub);
  // The CPU's and CUDA's kernel: a float tensor's dequantize() is the tensor itself (self.to(float32)), which
  // the generic kernel, trusting the schema, would copy.
  dense.impl("dequantize.self", &at::native::dequantize_cpu_or_cuda);
}

}  // namespace openreg::eager
