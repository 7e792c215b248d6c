#include "host_tensors.h"

#include <ATen/NestedTensorImpl.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/quantized/QTensorImpl.h>

#include <cstring>

#include "../generic/results.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/launch.h"

namespace openreg::eager {
namespace {

constexpr auto kOpenreg = c10::DeviceType::PrivateUse1;

bool on_device(const at::Tensor& t) { return t.defined() && t.device().type() == kOpenreg; }

// (An UnknownQuantizer, of an empty quantized tensor, has no qscheme to ask.)
bool per_channel(const at::QuantizerPtr& q) { return dynamic_cast<const at::PerChannelAffineQuantizer*>(q.get()); }

// A quantized tensor of `key_set` on `storage`, shaped as `like`.
at::Tensor qtensor(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like, at::QuantizerPtr quantizer) {
  auto t = at::detail::make_tensor<at::QTensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype(),
                                                    std::move(quantizer));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  return t;
}

// A nested tensor with `like`'s components (their sizes, strides and offsets)
// in `buffer`'s memory: the whole storage, as a 1-d tensor. As a `view`, it
// takes its keys from `buffer` (an inference tensor only when that is), else
// from the mode it is made in.
at::Tensor nested_over(const at::Tensor& buffer, const at::Tensor& like, bool view) {
  const auto* impl = at::native::get_nested_tensor_impl(like);
  if (view) {
    return at::detail::make_tensor<at::native::NestedTensorImpl>(c10::TensorImpl::VIEW, buffer,
                                                                 impl->get_nested_sizes(), impl->get_nested_strides(),
                                                                 impl->get_storage_offsets());
  }
  return at::detail::make_tensor<at::native::NestedTensorImpl>(buffer, impl->get_nested_sizes(),
                                                               impl->get_nested_strides(), impl->get_storage_offsets());
}

// A compressed tensor like `like` on `device`, of these members. Made as ATen's
// kernels make their results, without the invariant checks that
// `check_sparse_tensor_invariants` adds to the public constructors: the
// arguments were checked when they were made, the CPU's results never are.
at::Tensor compressed_like(const at::Tensor& like, c10::Device device, const at::Tensor& compressed_indices,
                           const at::Tensor& plain_indices, const at::Tensor& values) {
  const auto key = device.is_cpu() ? c10::DispatchKey::SparseCsrCPU : c10::DispatchKey::SparseCsrPrivateUse1;
  auto t =
      at::detail::make_tensor<at::SparseCsrTensorImpl>(c10::DispatchKeySet(key), device, like.layout(), like.dtype());
  at::sparse_csr::get_sparse_csr_impl(t)->set_member_tensors(compressed_indices, plain_indices, values, like.sizes());
  return t;
}

at::Tensor storage_as_tensor(const at::Tensor& nested) {
  return at::native::get_nested_tensor_impl(nested)->get_unsafe_storage_as_tensor();
}

}  // namespace

at::QuantizerPtr per_channel_like(const at::QuantizerPtr& q, const at::Tensor& scales, const at::Tensor& zero_points) {
  const auto axis = static_cast<const at::PerChannelAffineQuantizer*>(q.get())->axis();
  if (q->qscheme() == at::kPerChannelAffineFloatQParams) {
    return c10::make_intrusive<at::PerChannelAffineFloatQParamsQuantizer>(q->scalar_type(), scales, zero_points, axis);
  }
  return c10::make_intrusive<at::PerChannelAffineQuantizer>(q->scalar_type(), scales, zero_points, axis);
}

at::QuantizerPtr quantizer_on(const at::QuantizerPtr& q, c10::Device device) {
  if (!per_channel(q)) return q;
  const auto* pc = static_cast<const at::PerChannelAffineQuantizer*>(q.get());
  if (pc->scales().device() == device && pc->zero_points().device() == device) return q;
  return per_channel_like(q, pc->scales().to(device), pc->zero_points().to(device));
}

c10::Storage HostTensors::host_storage(const at::Tensor& t) {
  const c10::Storage& s = t.storage();
  for (size_t i = 0; i < device_bases_.size(); ++i) {
    if (device_bases_[i].storage().unsafeGetStorageImpl() == s.unsafeGetStorageImpl()) return host_storages_[i];
  }
  // One CPU storage per allocation, so ATen's overlap checks see what the device tensors share. It grows
  // (into host memory, until grow_storages) where the device's would.
  host_storages_.push_back(glue::HostAlias::of(t).storage(/*growable=*/s.resizable()));
  device_bases_.push_back(t);
  if (s.data() != nullptr) bases_.push_back(s.data());
  return host_storages_.back();
}

void HostTensors::grow_storages() {
  for (size_t i = 0; i < host_storages_.size(); ++i) {
    const c10::Storage& device = device_bases_[i].storage();
    if (host_storages_[i].data() != device.data()) grow_on_device(device, host_storages_[i]);
  }
}

at::Tensor HostTensors::device_base(const c10::Storage& s) const {
  for (size_t i = 0; i < host_storages_.size(); ++i) {
    if (host_storages_[i].unsafeGetStorageImpl() == s.unsafeGetStorageImpl()) return device_bases_[i];
  }
  return {};
}

c10::Storage HostTensors::device_storage(const c10::Storage& s) const {
  const at::Tensor base = device_base(s);
  return base.defined() ? base.storage() : c10::Storage();
}

at::Tensor HostTensors::dense_to_host(const at::Tensor& t) {
  return glue::HostAlias::of(t).tensor(host_storage(t), t.sizes(), t.strides());
}

// As on CUDA, a per-channel quantizer's tensors live on its tensor's device:
// each side's copy is made once per call.
at::QuantizerPtr HostTensors::moved_quantizer(const at::QuantizerPtr& q, bool device) {
  if (!per_channel(q)) return q;  // its parameters are numbers
  for (const auto& [host, dev] : quantizers_) {
    if ((device ? host : dev) == q) return device ? dev : host;
  }
  const auto* pc = static_cast<const at::PerChannelAffineQuantizer*>(q.get());
  auto move = [&](const at::Tensor& t) { return device ? to_device(t) : to_host(t); };
  at::QuantizerPtr moved = per_channel_like(q, move(pc->scales()), move(pc->zero_points()));
  quantizers_.emplace_back(device ? q : moved, device ? moved : q);
  return moved;
}

at::Tensor HostTensors::to_host(const at::Tensor& t) {
  if (!on_device(t)) return t;
  for (const auto& [host, dev] : given_) {
    if (dev.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return host;
  }
  at::Tensor host;
  if (t.is_quantized()) {
    host =
        qtensor(host_storage(t), c10::DispatchKey::QuantizedCPU, t, moved_quantizer(t.quantizer(), /*device=*/false));
  } else if (t.is_nested()) {  // (whose layout is also strided)
    host = nested_over(dense_to_host(storage_as_tensor(t)), t, /*view=*/false);
    // Its sizes, strides and offsets stay CPU tensors when a kernel returns them.
    const auto* impl = at::native::get_nested_tensor_impl(t);
    for (const at::Tensor& m : {impl->get_nested_sizes(), impl->get_nested_strides(), impl->get_storage_offsets()}) {
      given_.emplace_back(m, m);
    }
  } else if (t.layout() == at::kStrided) {
    host = dense_to_host(t);
  } else if (t.layout() == at::kSparse) {
    auto* impl = at::sparse::get_sparse_impl(t);
    host = at::_sparse_coo_tensor_with_dims_and_tensors(t.sparse_dim(), t.dense_dim(), t.sizes(),
                                                        dense_to_host(impl->indices()), dense_to_host(impl->values()),
                                                        t.options().device(at::kCPU), t.is_coalesced());
  } else if (at::sparse_csr::is_sparse_compressed(t)) {
    auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
    host = compressed_like(t, at::Device(at::kCPU), dense_to_host(impl->compressed_indices()),
                           dense_to_host(impl->plain_indices()), dense_to_host(impl->values()));
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "openreg does not support tensors of layout ", t.layout());
  }
  // Some CPU kernels keep what backward needs only when an input requires grad
  // (sparse.mm's reduce="amax" indices); below autograd, nothing is recorded.
  if (t.requires_grad()) host.set_requires_grad(true);
  given_.emplace_back(host, t);
  return host;
}

c10::IValue HostTensors::to_host(const c10::IValue& v) {
  if (v.isTensor()) return to_host(v.toTensor());
  if (v.isDevice() && v.toDevice().type() == kOpenreg) return c10::Device(at::kCPU);
  if (v.isTensorList()) {
    c10::List<at::Tensor> host;
    for (const at::Tensor& t : v.toTensorList()) host.push_back(to_host(t));
    return host;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> host;
    for (const c10::IValue& e : v.toListRef()) {
      host.push_back(e.isTensor() ? std::optional<at::Tensor>(to_host(e.toTensor())) : std::nullopt);
    }
    return host;
  }
  return v;
}

at::Tensor HostTensors::dense_to_device(const at::Tensor& cpu) {
  const at::Tensor base = device_base(cpu.storage());
  if (!base.defined()) return adopt(cpu);
  // A view is an inference tensor when its base is, whatever the mode (the
  // base's keys say which).
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(),
                                                    cpu.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  t._set_conj(cpu.is_conj());
  t._set_neg(cpu.is_neg());
  return t;
}

c10::Storage HostTensors::storage_to_device(const c10::Storage& cpu) {
  if (c10::Storage shared = device_storage(cpu)) return shared;
  c10::Storage dev(c10::Storage::use_byte_size_t(), cpu.nbytes(), glue::device_allocator(), /*resizable=*/true);
  if (cpu.nbytes() > 0) {
    HostAccess access({dev.data()});
    std::memcpy(dev.mutable_data(), cpu.data(), cpu.nbytes());
  }
  return dev;
}

at::Tensor HostTensors::convert(const at::Tensor& cpu) {
  if (cpu.is_quantized()) {
    return qtensor(storage_to_device(cpu.storage()), c10::DispatchKey::QuantizedPrivateUse1, cpu,
                   moved_quantizer(cpu.quantizer(), /*device=*/true));
  }
  if (cpu.is_nested()) {
    const at::Tensor base = device_base(cpu.storage());
    if (base.defined()) return nested_over(base, cpu, /*view=*/true);
    return nested_over(adopt(storage_as_tensor(cpu)), cpu, /*view=*/false);
  }
  const c10::Device device(kOpenreg, device_);
  if (cpu.layout() == at::kSparse) {
    auto* impl = at::sparse::get_sparse_impl(cpu);
    return at::_sparse_coo_tensor_with_dims_and_tensors(
        cpu.sparse_dim(), cpu.dense_dim(), cpu.sizes(), dense_to_device(impl->indices()),
        dense_to_device(impl->values()), cpu.options().device(device), cpu.is_coalesced());
  }
  if (at::sparse_csr::is_sparse_compressed(cpu)) {
    auto* impl = at::sparse_csr::get_sparse_csr_impl(cpu);
    return compressed_like(cpu, device, dense_to_device(impl->compressed_indices()),
                           dense_to_device(impl->plain_indices()), dense_to_device(impl->values()));
  }
  return dense_to_device(cpu);
}

at::Tensor HostTensors::to_device(const at::Tensor& cpu) {
  if (!cpu.defined() || !cpu.is_cpu()) return cpu;
  for (const auto& [host, dev] : given_) {
    if (host.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return dev;
  }
  return convert(cpu);
}

c10::IValue HostTensors::to_device(const c10::IValue& v) {
  if (v.isTensor()) return to_device(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> dev;
    for (const at::Tensor& t : v.toTensorList()) dev.push_back(to_device(t));
    return dev;
  }
  return v;
}

void HostTensors::write_back(const at::Tensor& dev, const at::Tensor& host) {
  if (!on_device(dev) || dev.unsafeGetTensorImpl() == host.unsafeGetTensorImpl()) return;
  auto* impl = dev.unsafeGetTensorImpl();
  if (dev.is_nested()) {
    TORCH_INTERNAL_ASSERT(device_storage(host.storage()).unsafeGetStorageImpl() == dev.storage().unsafeGetStorageImpl(),
                          "a CPU kernel replaced a nested tensor's memory");
  } else if (dev.layout() == at::kSparse) {
    auto* sparse = at::sparse::get_sparse_impl(dev);
    auto* from = at::sparse::get_sparse_impl(host);
    sparse->raw_resize_(host.sparse_dim(), host.dense_dim(), host.sizes());
    sparse->set_indices_and_values_unsafe(dense_to_device(from->indices()), dense_to_device(from->values()));
    sparse->set_coalesced(host.is_coalesced());
  } else if (at::sparse_csr::is_sparse_compressed(dev)) {
    auto* from = at::sparse_csr::get_sparse_csr_impl(host);
    at::sparse_csr::get_sparse_csr_impl(dev)->set_member_tensors(dense_to_device(from->compressed_indices()),
                                                                 dense_to_device(from->plain_indices()),
                                                                 dense_to_device(from->values()), host.sizes());
  } else if (device_storage(host.storage()).unsafeGetStorageImpl() == dev.storage().unsafeGetStorageImpl()) {
    // written in place
    impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
    if (dev.is_quantized()) at::set_quantizer_(dev, moved_quantizer(host.quantizer(), /*device=*/true));
  } else {  // an out= tensor the CPU kernel gave other memory (set_)
    TORCH_INTERNAL_ASSERT(!dev.is_quantized(), "a CPU kernel replaced a quantized tensor's storage");
    dev.resize_(host.sizes());
    glue::HostView view = glue::HostView::of(dev);
    HostAccess access({view.data()});
    view.tensor().copy_(host);
  }
}

}  // namespace openreg::eager
