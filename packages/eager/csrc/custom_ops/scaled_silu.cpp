// An example of a vendor's own fused kernel: openreg::scaled_silu(x, scale)
// = scale * x * sigmoid(x) in one pass over device memory, queued on the
// current stream like any kernel. Its fake (meta) kernel and autograd formula
// are registered from Python (openreg_eager/custom_ops.py), the usual split.
// It uses only openreg's extension surface (openreg/extension.h), as a
// user's extension would.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>

#include "openreg/extension.h"

namespace openreg::eager {
namespace {

template <typename T>
void scaled_silu_loop(const T* x, T* y, int64_t n, double scale) {
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    using acc = at::opmath_type<T>;  // float for half types, else T itself
    for (int64_t i = begin; i < end; ++i) {
      const acc v = static_cast<acc>(x[i]);
      y[i] = static_cast<T>(static_cast<acc>(scale) * v / (acc(1) + std::exp(-v)));
    }
  });
}

void scaled_silu_host(const at::Tensor& x, const at::Tensor& y, double scale) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "scaled_silu", [&] {
    scaled_silu_loop(x.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), x.numel(), scale);
  });
}

at::Tensor scaled_silu_cpu(const at::Tensor& x, double scale) {
  at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  scaled_silu_host(input, out, scale);
  return out;
}

at::Tensor scaled_silu_openreg(const at::Tensor& x, double scale) {
  TORCH_CHECK(x.is_floating_point(), "openreg::scaled_silu expects a floating-point tensor, but got ", x.scalar_type());
  c10::DeviceGuard guard(x.device());
  at::Tensor input = x.contiguous();
  at::Tensor out = ext::empty_like(input);
  ext::HostView in = ext::HostView::of(input), res = ext::HostView::of(out);
  ext::launch(x.device(), "openreg::scaled_silu", {in, res},
              [in, res, scale] { scaled_silu_host(in.tensor(), res.tensor(), scale); });
  return out;
}

}  // namespace

TORCH_LIBRARY(openreg, m) { m.def("scaled_silu(Tensor x, float scale) -> Tensor"); }

TORCH_LIBRARY_IMPL(openreg, CPU, m) { m.impl("scaled_silu", &scaled_silu_cpu); }

TORCH_LIBRARY_IMPL(openreg, PrivateUse1, m) { m.impl("scaled_silu", &scaled_silu_openreg); }

}  // namespace openreg::eager
