// Copies of quantized tensors between the CPU and openreg, or two openreg
// devices. copy_ hands devices it does not know to _copy_from before its
// quantized handling, so the CPU's copy_ runs here on host views: it
// quantizes a float source with
// the destination's quantizer, or gives the destination the source's. The
// destination's quantizer then keeps its tensors on its own device, so a CPU
// tensor never reads device memory.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/_to_copy_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../generic/at_call.h"
#include "../layouts/host_tensors.h"
#include "../layouts/registration.h"
#include "openreg/core/strict.h"

namespace openreg::eager {
namespace {

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  const c10::Device device = dst.is_cpu() ? self.device() : dst.device();
  c10::DeviceGuard guard(device);
  if (!self.is_cpu() && self.device() != device) {
    wait_for_queued_work(self.device().index(), "a copy of a quantized tensor");
  }
  const InStreamOrder in_order(device.index(), "a copy of a quantized tensor");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  HostTensors host(device.index());
  at::Tensor to = host.to_host(dst), from = host.to_host(self);
  {
    HostAccess access(host.touches().data(), host.touches().size());
    to.copy_(from);
  }
  if (self.is_quantized()) at::set_quantizer_(dst, quantizer_on(self.quantizer(), dst.device()));
  return dst;
}

// The composite _to_copy gives its result the source's quantizer after the copy.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  at::Tensor r = at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  if (r.is_quantized()) at::set_quantizer_(r, quantizer_on(r.quantizer(), r.device()));
  return r;
}

}  // namespace

void register_quantized_copies(torch::Library& quantized) {
  quantized.impl("_copy_from", &copy_from);
  quantized.impl("_to_copy", &to_copy);
}

}  // namespace openreg::eager
