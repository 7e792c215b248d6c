#include "openreg/glue/launch.h"

#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

namespace openreg::glue {

HostAlias HostAlias::of(const at::Tensor& t) {
  HostAlias a;
  const auto* impl = t.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();  // no reference taken
  a.base = const_cast<void*>(storage->data());  // device memory is never copy-on-write
  a.nbytes = storage->nbytes();
  a.offset = impl->storage_offset();
  a.dtype = t.scalar_type();
  a.conj = t.is_conj();
  a.neg = t.is_neg();
  return a;
}

void* HostAlias::data(c10::IntArrayRef sizes) const {
  // As Tensor::data_ptr(): null for a tensor without elements.
  if (base == nullptr || c10::multiply_integers(sizes) == 0) return nullptr;
  return static_cast<char*>(base) + offset * static_cast<int64_t>(c10::elementSize(dtype));
}

at::Tensor HostAlias::tensor(c10::IntArrayRef sizes, c10::IntArrayRef strides) const {
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

HostView::HostView(const HostAlias& alias, c10::IntArrayRef sizes, c10::IntArrayRef strides) : HostAlias(alias) {
  shape.append(sizes.begin(), sizes.end());
  shape.append(strides.begin(), strides.end());
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
