#include "openreg/glue/launch.h"

#include <c10/util/Exception.h>

namespace openreg::glue {

HostView HostView::of(const at::Tensor& t) {
  HostView v;
  v.data = t.data_ptr();
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.dtype = t.scalar_type();
  return v;
}

at::Tensor HostView::tensor() const {
  return at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype).device(at::kCPU));
}

c10::Stream current_stream(c10::DeviceIndex device) {
  int id = checked([&] { return openreg::current_stream(device).id(); });
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

Stream& core_stream(const c10::Stream& stream) {
  return checked([&]() -> Stream& { return get_stream(stream.device_index(), static_cast<int>(stream.id())); });
}

void wait(c10::DeviceIndex device, uint64_t seq) {
  checked([&] {
    openreg::current_stream(device).wait_for(seq);
    raise_pending_error(device);
  });
}

}  // namespace openreg::glue
