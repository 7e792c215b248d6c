#pragma once
// openreg tensors of every layout (strided, sparse COO, sparse compressed,
// quantized, nested) as CPU tensors over the same device memory, so that the
// CPU's kernels for those layouts run on it in place; and the CPU kernel's
// results as openreg tensors again. A sparse tensor is its dense member
// tensors, a quantized one its storage and quantizer, a nested one its storage
// and its components' sizes, strides and offsets (CPU tensors on every
// device): each is aliased, never copied.
#include <ATen/ATen.h>
#include <ATen/quantized/Quantizer.h>

#include <utility>
#include <vector>

#include "openreg/core/touch.h"

namespace openreg::eager {

// A quantizer like `q` (per channel) with these scales and zero points.
at::QuantizerPtr per_channel_like(const at::QuantizerPtr& q, const at::Tensor& scales, const at::Tensor& zero_points);
// `q`, with its tensors (per-channel parameters) on `device`.
at::QuantizerPtr quantizer_on(const at::QuantizerPtr& q, c10::Device device);

class HostTensors {
 public:
  // Results are made on openreg device `device`.
  explicit HostTensors(c10::DeviceIndex device) : device_(device) {}

  // The CPU tensor over `t`'s memory (`t` itself when it is not on openreg).
  at::Tensor to_host(const at::Tensor& t);
  c10::IValue to_host(const c10::IValue& v);

  // The openreg tensor holding what the CPU kernel returned: what it was given
  // when it returns an argument, a tensor on the same device memory when it
  // returns a view of one, else a copy in fresh device memory.
  at::Tensor to_device(const at::Tensor& cpu);
  c10::IValue to_device(const c10::IValue& v);

  // Grows the device storages that the CPU kernel grew (into host memory),
  // before write_back.
  void grow_storages();
  // Makes `dev` what its CPU tensor `host` became in a kernel that wrote it
  // (a sparse tensor's members and an out= tensor's shape may be replaced).
  void write_back(const at::Tensor& dev, const at::Tensor& host);

  // The device memory the CPU kernel may touch (strict mode opens it).
  const std::vector<Touch>& touches() const { return bases_; }

 private:
  at::Tensor dense_to_host(const at::Tensor& t);
  at::Tensor dense_to_device(const at::Tensor& cpu);
  // What to_device makes of a tensor that is not one it was given.
  at::Tensor convert(const at::Tensor& cpu);
  // The device storage `cpu` aliases, or a copy of it in fresh device memory.
  c10::Storage storage_to_device(const c10::Storage& cpu);
  // `q` with its per-channel tensors on the device (`device`) or the host.
  at::QuantizerPtr moved_quantizer(const at::QuantizerPtr& q, bool device);
  c10::Storage host_storage(const at::Tensor& t);
  // A device tensor over the memory the CPU storage `s` aliases (undefined
  // when it aliases none), and that memory's storage (empty when none).
  at::Tensor device_base(const c10::Storage& s) const;
  c10::Storage device_storage(const c10::Storage& s) const;

  c10::DeviceIndex device_;
  std::vector<std::pair<at::Tensor, at::Tensor>> given_;                   // (host, device) per argument converted
  std::vector<std::pair<at::QuantizerPtr, at::QuantizerPtr>> quantizers_;  // (host, device)
  std::vector<c10::Storage> host_storages_;                                // one per device allocation,
  std::vector<at::Tensor> device_bases_;                                   // in the same order
  std::vector<Touch> bases_;
};

}  // namespace openreg::eager
