// The kernel for openreg's sparse (COO and compressed), quantized and nested
// tensors: the dispatcher's fallback for their keys, and the kernel of the
// dense ops that make them. It runs the CPU's kernel for the same layout on
// CPU tensors over the device memory (HostTensors), so inputs are never copied.
//
// It runs at the call, after the stream's queued work, as CUDA synchronises
// for most sparse ops: their results' sizes (nnz) depend on the data (nested
// tensors' ops, asynchronous on CUDA, are synchronous here too). Results
// the CPU kernel allocates itself are copied into device memory once, since
// their sizes are known only after it ran; views of the inputs stay views.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <utility>

#include "../generic/at_call.h"
#include "../generic/cuda_dtypes.h"
#include "../generic/cuda_lacks.h"
#include "../generic/host_call.h"
#include "../generic/kernel.h"
#include "../generic/op_info.h"
#include "../generic/results.h"
#include "../generic/tensor_lists.h"
#include "host_tensors.h"
#include "openreg/glue/launch.h"
#include "registration.h"

namespace openreg::eager {
namespace {

// Where the results go: the openreg device the call names (nt.to("openreg:1")),
// else the arguments' one; nowhere else where it names the CPU (nt.to("cpu")):
// they stay where the CPU's kernel made them.
struct Target {
  c10::DeviceIndex device;
  bool on_device;
};

Target target_of(c10::ArrayRef<c10::IValue> args, const OpInfo& info, c10::DeviceIndex device) {
  if (info.device_arg < 0 || !args[info.device_arg].isDevice()) return {device, true};
  const c10::Device named = args[info.device_arg].toDevice();
  if (named.type() != c10::DeviceType::PrivateUse1) return {device, false};
  return {named.has_index() ? named.index() : device, true};
}

// Runs `op`'s CPU kernel on host views of `args` and leaves its results at `target`.
torch::jit::Stack run_on_host(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                              Target target) {
  const auto& schema = op.schema();
  HostTensors host(target.device);
  torch::jit::Stack stack;
  for (const auto& a : args) stack.push_back(host.to_host(a));
  // It draws from openreg's generator, as CUDA's kernels for these layouts draw from CUDA's.
  if (info.generator_arg >= 0) {
    stack[info.generator_arg] = take_state(device_generator(args[info.generator_arg], target.device));
  }
  const std::vector<c10::IValue> given(stack.begin(), stack.end());
  HostAccess access(host.touches().data(), host.touches().size());
  glue::WorkerDispatchState as_on_the_device;
  // Below autograd, as the CPU's kernel runs there: an op it calls must not record history of (or refuse) the
  // host tensors that require grad.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  try {
    op.callBoxed(&stack);
  } catch (const c10::Error&) {
    stack = given;
    if (!call_in_cuda_dtype(op, &stack)) throw;
  }
  host.grow_storages();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite()) continue;
    const Tensors dev = tensors_of(args[i]), cpu = tensors_of(given[i]);
    for (size_t k = 0; k < dev.size(); ++k) host.write_back(dev[k], cpu[k]);
  }
  if (target.on_device) {
    for (auto& v : stack) v = host.to_device(v);
  }
  return stack;
}

// The arguments' device. copy_ moves a tensor of any layout between the CPU
// and openreg, as CUDA's does: its device is the openreg side's.
c10::DeviceIndex device_of(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  if (op.schema().name() == "aten::copy_") {
    for (const auto& a : args) {
      if (a.isTensor() && a.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
        return a.toTensor().device().index();
      }
    }
  }
  return common_device(op, args, info);
}

// The arguments' layout, and how to leave it.
std::pair<const char*, const char*> layout_of(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args) {
    if (!a.isTensor() || !a.toTensor().defined()) continue;
    const at::Tensor& t = a.toTensor();
    if (t.is_quantized()) return {"quantized", ".dequantize()"};
    if (t.is_nested()) return {"nested", ".to_padded_tensor() or .unbind()"};
    if (t.layout() == at::kSparse) return {"sparse", ".to_dense()"};
    if (t.layout() != at::kStrided) return {"sparse compressed", ".to_dense()"};
  }
  return {"dense", ".cpu()"};
}

// The CPU's "Could not run 'op' with arguments from the 'SparseCPU' backend."
// naming openreg's key, as CUDA's names SparseCUDA.
std::string as_openregs(std::string what) {
  using c10::DispatchKey;
  what = what.substr(0, what.find(". ") + 1);
  for (const DispatchKey cpu : {DispatchKey::SparseCPU, DispatchKey::SparseCsrCPU, DispatchKey::QuantizedCPU,
                                DispatchKey::NestedTensorCPU, DispatchKey::CPU}) {
    const DispatchKey mine =
        c10::toRuntimePerBackendFunctionalityKey(c10::toFunctionalityKey(cpu), c10::BackendComponent::PrivateUse1Bit);
    const std::string from = c10::str("'", cpu, "' backend"), to = c10::str("'", mine, "' backend");
    const auto at = what.find(from);
    if (at != std::string::npos) return what.replace(at, from.size(), to);
  }
  return what;
}

// The host reads and writes device memory here, after the queued work of
// every device the call touches (the target's stream it then holds): copy_
// reads one device and writes another, and results made on a named device take
// blocks its queued work may still use.
void wait_for_other_devices(c10::ArrayRef<c10::IValue> args, c10::DeviceIndex target, const char* call) {
  c10::SmallVector<c10::DeviceIndex, 2> devices{target};
  for (const auto& a : args) {
    for (const at::Tensor& t : tensors_of(a)) {
      if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) continue;
      if (std::find(devices.begin(), devices.end(), t.device().index()) == devices.end()) {
        devices.push_back(t.device().index());
      }
    }
  }
  for (const c10::DeviceIndex d : devices) {
    if (d != target) wait_for_queued_work(d, call);
  }
}

// What CUDA has no kernel for in the arguments' layout is refused, as on
// CUDA, though the CPU has one.
void refuse_what_cuda_lacks(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  if (info.cuda_lacks_kernel == c10::DispatchKey::Undefined) return;
  for (const auto& a : args) {
    for (const at::Tensor& t : tensors_of(a)) {
      if (t.defined() && t.key_set().has(info.cuda_lacks_kernel))
        refuse_as_cuda_lacks(op.operator_name(), info.cuda_lacks_kernel);
    }
  }
}

void layout_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  use_canonical_tensor_lists(*stack, n);
  auto args = torch::jit::last(*stack, n);
  const OpInfo& info = op_info(op);
  refuse_what_cuda_lacks(op, args, info);
  const c10::DeviceIndex device = device_of(op, args, info);
  const Target target = target_of(args, info, device);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, target.device));
  wait_for_other_devices(args, target.device, op.schema().name().c_str());
  const InStreamOrder in_order(target.device, op.schema().name().c_str());
  torch::jit::Stack results;
  try {
    results = run_on_host(op, args, info, target);
  } catch (const c10::NotImplementedError& e) {
    const std::string what = e.what_without_backtrace();
    if (what.rfind("Could not run", 0) != 0) throw;
    const auto [layout, remedy] = layout_of(args);
    TORCH_CHECK_NOT_IMPLEMENTED(false, as_openregs(what), " openreg runs the CPU's kernels for its ", layout,
                                " tensors, and the CPU has none for these arguments: convert them first (", remedy,
                                ") or run the op on the CPU.");
  }
  torch::jit::drop(*stack, n);
  for (auto& r : results) stack->push_back(std::move(r));
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_kernel>()); }

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_kernel>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_kernel>());
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_kernel>());
}

namespace {

// Composite kernels (CompositeExplicitAutograd and the structured ops'
// wrappers) are every backend's default and win over the fallback; for the
// ops the CPU serves with a kernel of its own for the layout, they would
// allocate results as dense tensors or decompose differently. The CPU's
// kernel serves them, as on the CPU. With `implicit`, so are the ops whose
// default is CompositeImplicitAutograd: only for a layout whose autograd key is
// the CPU's too (nested), as otherwise the kernel would hide the op from
// openreg's own autograd key.
void serve_like_the_cpu(torch::Library& lib, c10::DispatchKey key, c10::DispatchKey cpu_key, bool implicit) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNamesForDispatchKey(cpu_key)) {
    auto op = dispatcher.findSchema(name);
    if (!op || name.name.rfind("aten::", 0) != 0 || op->hasKernelForDispatchKey(key)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
        !(implicit && op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))) {
      continue;
    }
    std::string unqualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib.impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&layout_kernel>());
  }
}

const bool g_registered = [] {
  using c10::DispatchKey;
  static torch::Library coo(torch::Library::IMPL, "aten", DispatchKey::SparsePrivateUse1, __FILE__, __LINE__);
  static torch::Library compressed(torch::Library::IMPL, "aten", DispatchKey::SparseCsrPrivateUse1, __FILE__, __LINE__);
  static torch::Library quantized(torch::Library::IMPL, "aten", DispatchKey::QuantizedPrivateUse1, __FILE__, __LINE__);
  static torch::Library nested(torch::Library::IMPL, "aten", DispatchKey::NestedTensorPrivateUse1, __FILE__, __LINE__);
  static torch::Library dense(torch::Library::IMPL, "aten", DispatchKey::PrivateUse1, __FILE__, __LINE__);
  register_sparse_structure(coo, compressed);
  register_quantized_structure(quantized, dense);
  register_quantized_copies(quantized);
  register_nested_random(nested);
  register_nested_dense(nested);
  serve_like_the_cpu(coo, DispatchKey::SparsePrivateUse1, DispatchKey::SparseCPU, /*implicit=*/false);
  serve_like_the_cpu(compressed, DispatchKey::SparseCsrPrivateUse1, DispatchKey::SparseCsrCPU, /*implicit=*/false);
  serve_like_the_cpu(quantized, DispatchKey::QuantizedPrivateUse1, DispatchKey::QuantizedCPU, /*implicit=*/false);
  serve_like_the_cpu(nested, DispatchKey::NestedTensorPrivateUse1, DispatchKey::NestedTensorCPU, /*implicit=*/true);
  // Dense ops whose results are sparse, quantized or nested.
  for (const char* name :
       {"quantize_per_tensor", "quantize_per_tensor.tensor_qparams", "quantize_per_tensor.tensors",
        "quantize_per_tensor_dynamic", "quantize_per_channel", "_make_per_tensor_quantized_tensor",
        "_make_per_channel_quantized_tensor", "_to_sparse", "_to_sparse.sparse_dim", "_to_sparse_csr", "_to_sparse_csc",
        "_to_sparse_bsr", "_to_sparse_bsc", "_nested_from_padded", "_nested_tensor_from_mask",
        "_nested_view_from_buffer", "_nested_view_from_buffer_copy"}) {
    dense.impl(name, torch::CppFunction::makeFromBoxedFunction<&layout_kernel>());
  }
  return true;
}();

}  // namespace
}  // namespace openreg::eager
