// myops::axpy(x, y, a) = a * x + y, for the CPU and for openreg: the kernel of the extension examples
// (axpy_inline.py builds it at run time, setup.py as a wheel). On openreg it is queued on the current stream
// through openreg/extension.h, the surface for kernel authors.
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <cmath>

#include "openreg/extension.h"

namespace {

void axpy_loop(const at::Tensor& x, const at::Tensor& y, const at::Tensor& out, double a) {
  TORCH_CHECK(!std::isnan(a), "myops::axpy: a is NaN");
  if (std::isinf(a)) TORCH_WARN("myops::axpy: a is ", a, ", so no result is finite");
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "axpy", [&] {
    const scalar_t* px = x.const_data_ptr<scalar_t>();
    const scalar_t* py = y.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    for (int64_t i = 0; i < x.numel(); ++i) po[i] = static_cast<scalar_t>(a) * px[i] + py[i];
  });
}

void check_args(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type(),
              "myops::axpy: x and y must have one shape and dtype, got ", x.sizes(), " ", x.scalar_type(), " and ",
              y.sizes(), " ", y.scalar_type());
}

at::Tensor axpy_cpu(const at::Tensor& x, const at::Tensor& y, double a) {
  check_args(x, y);
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  axpy_loop(x.contiguous(), y.contiguous(), out, a);
  return out;
}

at::Tensor axpy_openreg(const at::Tensor& x, const at::Tensor& y, double a) {
  check_args(x, y);  // at the call, as CUDA's host code checks
  c10::DeviceGuard guard(x.device());
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = openreg::ext::empty_like(xc);
  auto vx = openreg::ext::HostView::of(xc), vy = openreg::ext::HostView::of(yc), vo = openreg::ext::HostView::of(out);
  openreg::ext::launch(x.device(), "myops::axpy", {vx, vy, vo},
                       [vx, vy, vo, a] { axpy_loop(vx.tensor(), vy.tensor(), vo.tensor(), a); });
  return out;
}

}  // namespace

TORCH_LIBRARY(myops, m) { m.def("axpy(Tensor x, Tensor y, float a) -> Tensor"); }
TORCH_LIBRARY_IMPL(myops, CPU, m) { m.impl("axpy", &axpy_cpu); }
TORCH_LIBRARY_IMPL(myops, PrivateUse1, m) { m.impl("axpy", &axpy_openreg); }
