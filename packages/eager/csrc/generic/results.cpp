#include "results.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <c10/core/Contiguity.h>
#include <c10/util/accumulate.h>

#include <cstring>

#include "openreg/glue/allocator.h"
#include "openreg/glue/launch.h"

namespace openreg::eager {

at::Tensor allocate(const TensorMeta& m) {
  return at::detail::empty_strided_generic(m.sizes, m.strides, glue::device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), m.dtype);
}

namespace {

// With the storage before and between its elements, as the CPU tensor `m` describes has it.
at::Tensor allocate_span(const TensorMeta& m) {
  const size_t itemsize = c10::elementSize(m.dtype);
  const size_t nbytes = at::detail::computeStorageNbytes(m.sizes, m.strides, itemsize, static_cast<size_t>(m.offset));
  at::Tensor t = at::detail::empty_generic({static_cast<int64_t>(nbytes / itemsize)}, glue::device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), m.dtype, std::nullopt);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, m.offset);
  return t;
}

}  // namespace

void grow_on_device(const c10::Storage& device, const c10::Storage& host) {
  const size_t nbytes = host.nbytes();
  at::native::resize_bytes_nocuda(device, static_cast<int64_t>(nbytes));
  void* to = device.mutable_data();
  glue::run_in_order(device.device().index(), "growing a tensor's storage", {Touch(to, /*write=*/true)},
                     [&] { std::memcpy(to, host.data(), nbytes); });
}

at::Tensor adopt(const at::Tensor& cpu) {
  if (!cpu.defined()) return cpu;
  // Ops with sparse or quantized results are served by layouts/layout_kernel.cpp.
  TORCH_CHECK(cpu.layout() == at::kStrided && !cpu.is_quantized(), "openreg's generic kernel got a ", cpu.layout(),
              cpu.is_quantized() ? " quantized" : "",
              " result from a CPU kernel and cannot hold it: please report this "
              "op to openreg");
  at::Tensor stored = cpu;  // the values as stored, without the lazy bits
  if (stored.is_conj()) stored = stored._conj();
  if (stored.is_neg()) stored = stored._neg_view();
  const TensorMeta m = meta_of(stored);
  // A dense result (often a slice of a CPU workspace) starts a storage of its own. One with gaps or overlaps keeps
  // the kernel's strides and offset (clone_preserve_strides of a view does that on every device) and the span of
  // storage they reach.
  const bool dense = stored.is_non_overlapping_and_dense();
  at::Tensor t = dense ? allocate(m) : allocate_span(m);
  if (t.numel() > 0) {
    glue::HostView view = glue::HostView::of(t);
    HostAccess access({view.data()});
    if (dense) {
      view.tensor().copy_(stored);
    } else {
      std::memcpy(view.data(), stored.const_data_ptr(),
                  at::detail::computeStorageNbytes(m.sizes, m.strides, stored.itemsize(), 0));
    }
  }
  t._set_conj(cpu.is_conj());
  t._set_neg(cpu.is_neg());
  return t;
}

Tensors tensors_of(const c10::IValue& v) {
  Tensors out;
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList() || v.isOptionalTensorList()) {
    for (const c10::IValue& e : v.toListRef()) out.push_back(e.isTensor() ? e.toTensor() : at::Tensor());
  }
  return out;
}

c10::IValue pack(Tensors&& tensors, const c10::Argument& ret) {
  if (ret.type()->kind() == c10::TypeKind::TensorType) return std::move(tensors[0]);
  return c10::List<at::Tensor>(
      std::vector<at::Tensor>(std::make_move_iterator(tensors.begin()), std::make_move_iterator(tensors.end())));
}

bool same_shape(const at::Tensor& t, const TensorMeta& m) {
  return t.sizes() == c10::IntArrayRef(m.sizes) && t.strides() == c10::IntArrayRef(m.strides);
}

void resize_written(c10::ArrayRef<c10::IValue> args, const MetaResult& meta) {
  for (size_t i = 0; i < args.size(); ++i) {
    // The meta kernel was given an empty out= tensor, so it lays out a fresh one; an out= tensor of the result's
    // sizes keeps its own strides and storage, as ATen's resize_output leaves it (an expanded one is then refused).
    if (!meta.written[i] || args[i].toTensor().sizes() == c10::IntArrayRef(meta.written[i]->sizes)) continue;
    const auto& m = *meta.written[i];
    auto* impl = args[i].toTensor().unsafeGetTensorImpl();
    const size_t needed =
        at::detail::computeStorageNbytes(m.sizes, m.strides, impl->itemsize(), impl->storage_offset());
    if (needed > impl->storage().nbytes()) {
      at::native::resize_bytes_nocuda(impl->storage(), static_cast<int64_t>(needed));
    }
    impl->set_sizes_and_strides(m.sizes, m.strides);
  }
}

void OwnOutputs::process(const c10::Warning& warning) {
  if (warning.msg().rfind("An output with one or more elements was resized", 0) != 0) next_->process(warning);
}

bool writes_via_out(const OpInfo& info, const MetaResult& meta) {
  bool via_out = info.out_variant.has_value() && !meta.functional_only;
  for (const auto& r : meta.results) {
    for (const auto& m : r) via_out = via_out && m.defined;
  }
  return via_out;
}

bool lays_out_strided(const OpInfo& info, const MetaResult& meta) {
  for (size_t i = 0; i < meta.results.size(); ++i) {
    if (i < info.result_alias.size() && info.result_alias[i] >= 0) continue;
    for (const auto& m : meta.results[i]) {
      const int64_t numel = c10::multiply_integers(m.sizes);
      if (m.defined && !c10::_compute_contiguous<int64_t>(m.sizes, m.strides, numel)) return true;
    }
  }
  return false;
}

Results allocate_results(const c10::OperatorHandle& op, const OpInfo& info, const MetaResult& meta, HostCall* call) {
  Results results;
  const auto& rets = op.schema().returns();
  for (size_t i = 0; i < rets.size(); ++i) {
    if (info.result_alias[i] >= 0) {
      results.emplace_back();
      continue;
    }
    Tensors fresh;
    for (const auto& m : meta.results[i]) {
      fresh.push_back(m.defined ? allocate(m) : at::Tensor());
      if (call != nullptr) call->add_out(fresh.back());
    }
    results.push_back(pack(std::move(fresh), rets[i]));
  }
  return results;
}

}  // namespace openreg::eager
