// The generic openreg kernel, installed as the runtime's PrivateUse1 fallback
// handler: it serves every ATen op that has a CPU kernel by running that
// kernel on device memory in place.
//
//  - view ops: result shapes from meta, results share the input's memory;
//  - everything else: shapes from meta (cached per signature), results
//    allocated on the device, the CPU kernel (its out= overload when there is
//    one, so results are written in place) queued on the current stream;
//  - a signature's first call, and those whose first call showed the CPU
//    kernel warning or laying out its outputs otherwise than the meta kernel,
//    run at the call (at_call.cpp), so that its checks raise there;
//  - data-dependent shapes and non-tensor results: the stream is synchronised
//    and the CPU kernel runs at the call, as CUDA synchronises for them.
#include "kernel.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>

#include "at_call.h"
#include "cuda_lacks.h"
#include "cuda_refuses.h"
#include "host_call.h"
#include "hot_ops.h"
#include "meta.h"
#include "op_info.h"
#include "op_policy.h"
#include "openreg/core/device.h"
#include "openreg/core/graph.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/fallback.h"
#include "openreg/glue/launch.h"
#include "openreg/glue/sync_debug.h"
#include "per_device.h"
#include "results.h"
#include "tensor_lists.h"

namespace openreg::eager {
namespace {

constexpr auto kOpenreg = c10::DeviceType::PrivateUse1;

template <typename F>
void for_each_tensor(c10::ArrayRef<c10::IValue> args, F&& f) {
  for (const auto& a : args) {
    if (a.isTensor()) {
      f(a.toTensor());
    } else if (a.isTensorList() || a.isOptionalTensorList()) {
      for (const c10::IValue& e : a.toListRef()) {
        if (e.isTensor()) f(e.toTensor());
      }
    }
  }
}

at::Tensor alias_of(const at::Tensor& base, const TensorMeta& m) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(),
                                                    c10::scalarTypeToTypeMeta(m.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, m.offset);
  return t;
}

Results run_view(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  auto meta = infer_meta(op, args, /*use_cache=*/false, /*rethrow=*/true);  // its checks are the meta kernel's
  TORCH_CHECK(meta, "'", op.schema().operator_name(),
              "' is a view op without a meta kernel, so openreg cannot "
              "work out the view's shape");
  Results results;
  const auto& rets = op.schema().returns();
  for (size_t i = 0; i < rets.size(); ++i) {
    const at::Tensor& base = args[info.result_alias[i]].toTensor();
    Tensors views;
    for (const auto& m : meta->results[i]) views.push_back(alias_of(base, m));
    results.push_back(pack(std::move(views), rets[i]));
  }
  return results;
}

// A queued op's work on the device: its CPU kernel on the host views.
struct DeviceWork {
  HostCall call;
  c10::OperatorHandle op;
  std::optional<c10::OperatorHandle> out_op;  // write the results in place through it
  // Without the out= overload: the fresh results, which the functional call's
  // results are copied into (data null: a result it skips or one written in place).
  std::vector<glue::HostView> into;

  // `queued_at`: as HostCall::guarded's.
  void operator()(std::optional<uint64_t> queued_at) const {
    call.guarded(op, into, queued_at, [&] {
      std::vector<glue::HostView> outs;
      if (out_op) {
        try {
          OwnOutputs own;
          call.run(*out_op, /*with_outs=*/true);  // wrote the results in place
          return;
        } catch (const c10::Error&) {
          // A few CPU out= kernels use their outputs as scratch space of another
          // shape, which device memory cannot be: compute functionally instead.
          outs = call.outs();
        }
      }
      const auto& targets = out_op ? outs : into;
      torch::jit::Stack out = call.run(op);
      if (std::none_of(targets.begin(), targets.end(), [](const glue::HostView& v) { return v.data() != nullptr; })) {
        return;
      }
      size_t k = 0;
      auto take = [&](const at::Tensor& t) {
        TORCH_INTERNAL_ASSERT(k < targets.size(), "the CPU kernel returned more tensors than its meta kernel");
        const auto& v = targets[k++];
        if (v.data() != nullptr) v.tensor().copy_(t);
      };
      for (const auto& v : out) {
        for (const at::Tensor& t : tensors_of(v)) take(t);
      }
    });
  }
};

// Elements (MetaResult::elements) up to which an op counts as short for
// glue::run_now_if_idle: a kernel of a few microseconds, about what a launch
// and the host's wait for it cost.
constexpr int64_t kShortOp = 1 << 14;

Results run_async(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                  c10::DeviceIndex device, const MetaResult& meta) {
  resize_written(args, meta);
  HostCall call(args, info.generator_arg, device);
  const bool via_out = writes_via_out(info, meta);
  Results results = allocate_results(op, info, meta, via_out ? &call : nullptr);
  std::vector<glue::HostView> into;  // not inline: usually empty, and the task is smaller
  if (!via_out) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (info.result_alias[i] >= 0) {
        into.resize(into.size() + meta.results[i].size());
        continue;
      }
      for (const at::Tensor& t : tensors_of(results[i]))
        into.push_back(t.defined() ? glue::HostView::of(t) : glue::HostView{});
    }
  }
  DeviceWork work{std::move(call), op, via_out ? info.out_variant : std::nullopt, std::move(into)};
  const char* name = op.schema().name().c_str();
  if (meta.elements <= kShortOp && glue::run_now_if_idle(device, name, [&] { work(std::nullopt); })) return results;
  glue::Touches touches;  // only strict mode and the stream sanitizer look at them
  if (config().strict || sanitizer::on()) {
    touches = work.call.touches(op.schema());
    for (const auto& v : work.into) {
      if (v.data() != nullptr) touches.emplace_back(v.data(), /*write=*/true);
    }
  }
  glue::launch(device, name, std::move(touches), [work = std::move(work), at = allocation_clock()] { work(at); });
  return results;
}

// Boolean masks: the CPU and CUDA find their true elements (CUDA synchronises
// for it), so an indexing op with one runs at the call.
bool has_mask_index(c10::ArrayRef<c10::IValue> args) {
  for (const auto& a : args) {
    if (!a.isOptionalTensorList()) continue;
    for (const c10::IValue& e : a.toListRef()) {
      if (e.isTensor() && (e.toTensor().scalar_type() == at::kBool || e.toTensor().scalar_type() == at::kByte)) {
        return true;
      }
    }
  }
  return false;
}

// PyTorch routes some ops of devices it does not know to "_overrideable" ops
// with no kernel; the CPU's op for the same work serves them.
const c10::OperatorHandle& cpu_equivalent(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const auto conv = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  static const auto conv_backward = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  const auto& name = op.schema().name();
  if (name == "aten::convolution_overrideable") return conv;  // same arguments
  if (name == "aten::convolution_backward_overrideable") {
    // convolution_backward also takes the bias sizes, after the weight.
    auto args = torch::jit::last(*stack, op.schema().arguments().size());
    const at::Tensor& weight = args[2].toTensor();
    const bool transposed = args[6].toBool();
    const int64_t groups = args[8].toInt();
    const bool wants_bias = args[9].toBoolList().get(2);
    std::optional<std::vector<int64_t>> bias_sizes;
    if (wants_bias) bias_sizes = std::vector<int64_t>{transposed ? weight.size(1) * groups : weight.size(0)};
    stack->insert(stack->end() - 7, bias_sizes ? c10::IValue(*bias_sizes) : c10::IValue());
    return conv_backward;
  }
  return op;
}

const bool g_installed = [] {
  glue::set_fallback_handler(&generic_kernel);
  return true;
}();

// Structured ops have generic wrappers (CompositeExplicitAutogradNonFunctional)
// that would work out shapes on the host and call the out= op, and for in-place
// variants write a temporary and copy it back: the generic kernel serves them
// directly instead, writing in place.
const bool g_structured = [] {
  static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  register_hot_ops(lib);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name :
       dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
    auto op = dispatcher.findSchema(name);
    // (A kernel of openreg's own may register after this, in another file's initialiser.)
    if (!op || name.name.rfind("aten::", 0) != 0 || has_policy(name, Policy::kKeepWrapper) ||
        has_policy(name, Policy::kOwnKernel) || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      continue;
    }
    std::string unqualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib.impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
  }
  return true;
}();

// Indexing makes its own device check before any other (its meta function),
// and names the indexed tensor's device: `cpu_tensor[device_index]` fails
// there on CUDA, with this message.
void check_index_devices(c10::ArrayRef<c10::IValue> args) {
  const c10::Device self = args[0].toTensor().device();
  for (const c10::IValue& index : args[1].toListRef()) {
    // A slot that `:` or `None` leaves (x[:, i, None, j]) arrives as an undefined tensor.
    if (!index.isTensor() || !index.toTensor().defined()) continue;
    const c10::Device d = index.toTensor().device();
    TORCH_CHECK(d.is_cpu() || d == self, "indices should be either on ", c10::kCPU,
                " or on the same device as the indexed tensor (", self, ")");
  }
}

// The CPU's kernels for ops that take efficient zero tensors check for them
// (dot returns one); the CPU kernel openreg runs sees only memory, so it gets
// real zeros, as torch's ZeroTensor fallback gives every other op. A written
// one is refused with the CPU's error.
std::optional<std::vector<c10::IValue>> materialize_zero_tensors(c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  std::optional<std::vector<c10::IValue>> materialized;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor() || !args[i].toTensor()._is_zerotensor()) continue;
    const at::Tensor& zero = args[i].toTensor();
    TORCH_CHECK(std::find(info.written.begin(), info.written.end(), static_cast<int>(i)) == info.written.end(),
                "ZeroTensors are immutable. Please use the materialized zero tensor obtained using .clone()");
    if (!materialized) materialized.emplace(args.begin(), args.end());
    (*materialized)[i] = at::zeros(zero.sizes(), zero.options());
  }
  return materialized;
}

// CUDA's generated wrapper, for the ops torchgen gives a device check: the
// first tensor sets the device and any other, a 0-dim CPU one too, raises.
void check_devices_as_cuda_wrapper(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  std::optional<c10::Device> device;
  for (int i : info.device_checked) {
    for_each_tensor(args.slice(i, 1), [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (!device) device = t.device();
      TORCH_CHECK(t.device() == *device, "Expected all tensors to be on the same device, but got ",
                  op.schema().arguments()[i].name(), " is on ", t.device(), ", different from other tensors on ",
                  *device, " (when checking argument in method '", op.schema().operator_name(),
                  "'). Move them to one device with .to().");
    });
  }
}

// An openreg generator given to a call that makes or takes CPU tensors alone (torch.randperm(n, generator=g), as a
// DataLoader's RandomSampler calls it) reaches openreg through the generator's dispatch key; the CPU kernel's check
// refuses it, as it refuses a CUDA generator there.
void refuse_a_generator_for_the_cpu(c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  if (info.generator_arg < 0 || args[info.generator_arg].isNone()) return;
  if (info.device_arg >= 0 && args[info.device_arg].isDevice() && args[info.device_arg].toDevice().type() == kOpenreg)
    return;
  const c10::DeviceType given = args[info.generator_arg].toGenerator().device().type();
  TORCH_CHECK(given != kOpenreg, "Expected a 'cpu' device type for generator but found '", given, "'");
}

}  // namespace

c10::DeviceIndex common_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  check_devices_as_cuda_wrapper(op, args, info);
  std::optional<c10::Device> device, other;
  int cpu_scalars = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto cpu = i < info.cpu_args.size() ? info.cpu_args[i] : OpInfo::CpuArg::kScalar;
    for_each_tensor(args.slice(i, 1), [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (t.device().type() == kOpenreg) {
        if (!device)
          device = t.device();
        else if (t.device() != *device && !other)
          other = t.device();
      } else if (t.is_cpu() && cpu != OpInfo::CpuArg::kNone && (t.dim() == 0 || cpu == OpInfo::CpuArg::kAny)) {
        cpu_scalars += t.dim() == 0;
      } else if (!other) {
        other = t.device();
      }
    });
  }
  if (device && other) {
    if (op.schema().name() == "aten::index") check_index_devices(args);
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", *device,
                " and ", *other, "! (in '", op.schema().operator_name(), "'). Move them to one device with .to().");
  }
  TORCH_CHECK(!device || !info.one_cpu_scalar || cpu_scalars <= 1,
              "Trying to pass too many CPU scalars to non-CPU kernel! (in '", op.schema().operator_name(),
              "', whose TensorIterator takes one CPU scalar beside device tensors). Move the others to ", *device,
              " with .to().");
  if (!device) refuse_a_generator_for_the_cpu(args, info);
  if (device) return device->index();
  if (info.device_arg >= 0 && args[info.device_arg].isDevice()) {
    auto d = args[info.device_arg].toDevice();
    if (d.type() == kOpenreg && info.pin_memory_arg >= 0)
      glue::check_not_pinned(args[info.pin_memory_arg].toOptional<bool>());
    if (d.type() == kOpenreg && d.has_index()) return d.index();
  }
  return static_cast<c10::DeviceIndex>(current_device());
}

void generic_kernel(const c10::OperatorHandle& called, torch::jit::Stack* stack) {
  const c10::OperatorHandle& op = cpu_equivalent(called, stack);
  const size_t n = op.schema().arguments().size();
  use_canonical_tensor_lists(*stack, n);
  auto args = torch::jit::last(*stack, n);
  Results results = run_op(op, args);
  const OpInfo& info = op_info(op);
  if (!info.view) {
    for (size_t i = 0; i < results.size() && i < info.result_alias.size(); ++i) {
      if (info.result_alias[i] >= 0) results[i] = args[info.result_alias[i]];
    }
  }
  torch::jit::drop(*stack, n);
  for (auto& r : results) stack->push_back(std::move(r));
}

// CUDA's dispatch on the first tensor argument's dtype, after the op's checks of shapes (its meta kernel's, which
// `meta_checked` says have run).
void refuse_what_cuda_refuses(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                              bool meta_checked) {
  if (info.cuda_refused.dtypes == 0) return;
  const auto first = std::find_if(args.begin(), args.end(), [](const c10::IValue& a) { return a.isTensor(); });
  if (first == args.end() || !refused(info.cuda_refused.dtypes, first->toTensor().scalar_type())) return;
  std::string deciding;
  if (!refused_for_argument(info.cuda_refused, op.schema(), args, &deciding)) return;
  if (!meta_checked) {
    // A check of the meta kernel's fails (not a missing meta kernel): the CPU kernel raises it, first, as CUDA does.
    try {
      infer_meta(op, args, /*use_cache=*/false, /*rethrow=*/true);
    } catch (const c10::NotImplementedError&) {
    } catch (const std::exception&) {
      return;
    }
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", op.schema().name().substr(6), "\"", deciding, " not implemented for '",
                              c10::toString(first->toTensor().scalar_type()),
                              "' on CUDA, which has no kernel for it; openreg refuses it too (the CPU computes it)");
}

Results run_op(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const OpInfo& info = op_info(op);
  if (info.foreach) {
    if (auto parts = run_per_device(op, args)) return std::move(*parts);
  }
  if (info.cuda_lacks_kernel == c10::DispatchKey::PrivateUse1)
    refuse_as_cuda_lacks(op.operator_name(), info.cuda_lacks_kernel);
  const c10::DeviceIndex device = common_device(op, args, info);
  c10::DeviceGuard guard(c10::Device(kOpenreg, device));
  // The dispatcher's sentence, as CUDA's gives it for an op it has no kernel for (int_repr of a dense tensor).
  TORCH_CHECK_NOT_IMPLEMENTED(info.has_cpu_kernel, "Could not run '", op.schema().operator_name(),
                              "' with arguments from the 'PrivateUse1' backend. openreg runs the CPU's kernel of an op "
                              "on device memory, and the CPU has none for it.");
  if (info.view) return run_view(op, args, info);
  if (info.takes_zero_tensors) {
    if (auto materialized = materialize_zero_tensors(args, info)) return run_op(op, *materialized);
  }
  for (int i : info.written) for_each_tensor(args.slice(i, 1), glue::materialize_for_write);
  const bool host = info.host_result || (info.host_unless_training >= 0 && !args[info.host_unless_training].toBool()) ||
                    (info.cpu_indices_ok && has_mask_index(args)) ||
                    (info.range_from_values && args[2].toScalar().toDouble() == args[3].toScalar().toDouble());
  if (!host) {
    if (auto meta = infer_meta(op, args, /*use_cache=*/true)) {
      refuse_what_cuda_refuses(op, args, info, /*meta_checked=*/true);
      // A signature's first call runs at the call so that its checks raise
      // there, unless a graph capture forbids waiting for the stream (it
      // records the op, or another thread captures in "global" mode).
      const bool queue = meta->verdict == Verdict::Queue || !openreg::may_wait(openreg::current_stream(device));
      if (queue && !openreg::in_task()) return run_async(op, args, info, device, *meta);
      return run_at_call(op, args, info, device, meta.get());
    }
  }
  // The result's shape or value depends on the data (nonzero, a mask, a
  // Python scalar result), or the kernel raises on what it computed (LAPACK's
  // status): the host waits for the device, as on CUDA.
  refuse_what_cuda_refuses(op, args, info, /*meta_checked=*/false);
  if (!info.host_unlike_cuda) glue::on_host_sync(op.schema().name().c_str());
  return run_at_call(op, args, info, device, nullptr);
}

// Ops whose kernels win over the fallback (composite ones, or none at all):
// the generic kernel is registered over them (op_policy.cpp says why).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (Policy policy : {Policy::kOverrideable, Policy::kBypassComposite}) {
    for (const auto& name : registered_names(policy)) {
      m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
    }
  }
}
}  // namespace openreg::eager
