#include "openreg/glue/launch.h"

#include <c10/util/Exception.h>

namespace openreg::glue {

HostView HostView::of(const at::Tensor& t) {
  HostView v;
  const auto* impl = t.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();  // no reference taken
  v.base = const_cast<void*>(storage->data());  // device memory is never copy-on-write
  v.nbytes = storage->nbytes();
  v.offset = impl->storage_offset();
  // As Tensor::data_ptr(): null for a tensor without elements.
  v.data = impl->is_empty() || v.base == nullptr
               ? nullptr
               : static_cast<char*>(v.base) + v.offset * static_cast<int64_t>(impl->itemsize());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.dtype = t.scalar_type();
  v.conj = t.is_conj();
  v.neg = t.is_neg();
  return v;
}

at::Tensor HostView::tensor() const {
  // A storage that does not own its memory: the device allocator does.
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(base, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                    c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  if (conj) t = t._conj();
  if (neg) t = t._neg_view();
  return t;
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
