#include "openreg/glue/launch.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/COW.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

namespace openreg::glue {

void materialize_for_write(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  c10::StorageImpl* storage = t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  // As a CPU kernel's mutable_data_ptr(), which also retires the storage's materializer.
  if (c10::impl::cow::is_cow_data_ptr(storage->data_ptr())) (void)storage->mutable_data();
}

HostAlias HostAlias::of(const at::Tensor& t) {
  HostAlias a;
  const auto* impl = t.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();  // no reference taken
  // A lazy clone's memory is its source's until written (materialize_for_write).
  a.base = const_cast<void*>(storage->data());
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

c10::Storage HostAlias::storage(bool growable) const {
  // Growing replaces the data pointer, which frees nothing: the device allocator owns the memory.
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(base, c10::Device(c10::kCPU)),
                      growable ? c10::GetCPUAllocator() : nullptr, growable);
}

at::Tensor HostAlias::tensor(c10::Storage storage, c10::IntArrayRef sizes, c10::IntArrayRef strides) const {
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

void raise_async(const AsyncError& err) {
  std::exception_ptr cause = err.cause;
  for (;;) {  // a task's own AsyncError wraps the c10 error it caught
    try {
      if (cause) std::rethrow_exception(cause);
    } catch (const AsyncError& inner) {
      cause = inner.cause;
      continue;
    } catch (const c10::IndexError&) {
      C10_THROW_ERROR(IndexError, err.what());
    } catch (const c10::ValueError&) {
      C10_THROW_ERROR(ValueError, err.what());
    } catch (const c10::TypeError&) {
      C10_THROW_ERROR(TypeError, err.what());
    } catch (const c10::NotImplementedError&) {
      C10_THROW_ERROR(NotImplementedError, err.what());
    } catch (const c10::LinAlgError&) {
      C10_THROW_ERROR(LinAlgError, err.what());
    } catch (const c10::OutOfMemoryError&) {
      C10_THROW_ERROR(OutOfMemoryError, err.what());
    } catch (const c10::DistBackendError&) {  // collectives (orccl)
      C10_THROW_ERROR(DistBackendError, err.what());
    } catch (const c10::DistNetworkError&) {
      C10_THROW_ERROR(DistNetworkError, err.what());
    } catch (const c10::DistError&) {
      C10_THROW_ERROR(DistError, err.what());
    } catch (...) {
    }
    C10_THROW_ERROR(Error, err.what());
  }
}

void wait(c10::DeviceIndex device, uint64_t seq) {
  checked([&] {
    openreg::current_stream(device).wait_for(seq, "a blocking wait for the device");
    raise_pending_error(device);
  });
}

}  // namespace openreg::glue
