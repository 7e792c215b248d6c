// The generic openreg kernel, installed as the runtime's PrivateUse1 fallback
// handler: it serves every ATen op that has a CPU kernel by running that
// kernel on device memory in place.
//
//  - view ops: result shapes from meta, results share the input's memory;
//  - everything else: shapes from meta (cached), results allocated on the
//    device, the CPU kernel (its out= overload when there is one, so results
//    are written in place) queued on the current stream;
//  - data-dependent shapes and non-tensor results: the stream is synchronised
//    and the CPU kernel runs on the host, as CUDA synchronises for them.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>

#include "../fallback/policy.h"
#include "host_call.h"
#include "hot_ops.h"
#include "kernel.h"
#include "meta.h"
#include "op_info.h"
#include "openreg/core/device.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/fallback.h"
#include "openreg/glue/launch.h"

namespace openreg::eager {
namespace {

// Thrown when an op must go through the CPU fallback after all.
struct NeedsFallback {
  const char* reason;
};

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

// The openreg device the op runs on. As on CUDA, tensors of one op must be on
// one device, CPU scalars (0-dim tensors) and CPU indices excepted.
c10::DeviceIndex common_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  std::optional<c10::Device> device, other;
  for_each_tensor(args, [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == kOpenreg) {
      if (!device) device = t.device();
      else if (t.device() != *device && !other) other = t.device();
    } else if (!(t.is_cpu() && (t.dim() == 0 || info.cpu_indices_ok)) && !other) {
      other = t.device();
    }
  });
  if (device && other) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", *device,
                " and ", *other, "! (in '", op.schema().operator_name(), "'). Move them to one device with .to().");
  }
  if (device) return device->index();
  if (info.device_arg >= 0 && args[info.device_arg].isDevice()) {
    auto d = args[info.device_arg].toDevice();
    if (d.type() == kOpenreg && d.has_index()) return d.index();
  }
  return static_cast<c10::DeviceIndex>(current_device());
}

at::Tensor allocate(const TensorMeta& m) {
  return at::detail::empty_strided_generic(m.sizes, m.strides, glue::device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), m.dtype);
}

at::Tensor alias_of(const at::Tensor& base, const TensorMeta& m) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()),
                                                    base.key_set(), c10::scalarTypeToTypeMeta(m.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, m.offset);
  return t;
}

// One result's tensors: one for a Tensor, any number for a Tensor[].
using Tensors = c10::SmallVector<at::Tensor, 1>;

// A Tensor's, or a list's elements (undefined for None); none for None.
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

Results run_view(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info) {
  auto meta = infer_meta(op, args, /*use_cache=*/false, /*rethrow=*/true);  // its checks are the meta kernel's
  TORCH_CHECK(meta, "'", op.schema().operator_name(), "' is a view op without a meta kernel, so openreg cannot "
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

bool same_shape(const at::Tensor& t, const TensorMeta& m) {
  return t.sizes() == c10::IntArrayRef(m.sizes) && t.strides() == c10::IntArrayRef(m.strides);
}

// Out= tensors get the capacity the meta kernel says the CPU kernel needs
// (device memory cannot grow inside a kernel). With `reshape`, also the shape,
// as the CPU kernel would give them (queued calls, whose kernels run later).
void prepare_written(c10::ArrayRef<c10::IValue> args, const MetaResult& meta, bool reshape) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!meta.written[i] || same_shape(args[i].toTensor(), *meta.written[i])) continue;
    const auto& m = *meta.written[i];
    auto* impl = args[i].toTensor().unsafeGetTensorImpl();
    const size_t needed = at::detail::computeStorageNbytes(m.sizes, m.strides, impl->itemsize(), impl->storage_offset());
    if (needed > impl->storage().nbytes()) {
      at::native::resize_bytes_nocuda(impl->storage(), static_cast<int64_t>(needed));
    }
    if (reshape) impl->set_sizes_and_strides(m.sizes, m.strides);
  }
}

// The out= overload writes results in place; it cannot skip a result.
bool writes_via_out(const OpInfo& info, const MetaResult& meta) {
  bool via_out = info.out_variant.has_value() && !meta.functional_only;
  for (const auto& r : meta.results) {
    for (const auto& m : r) via_out = via_out && m.defined;
  }
  return via_out;
}

// The results the meta kernel describes, allocated on the device (None for
// one written in place: the caller holds that argument). With `call`, they
// are its out= tensors.
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

Results run_async(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                  c10::DeviceIndex device, const MetaResult& meta) {
  prepare_written(args, meta, /*reshape=*/true);
  HostCall call(args, info.generator_arg, device);
  const bool via_out = writes_via_out(info, meta);
  Results results = allocate_results(op, info, meta, via_out ? &call : nullptr);
  // Without the out= overload: the fresh results, which the functional call's
  // results are copied into (data null: a result it skips or one written in place).
  std::vector<glue::HostView> into;  // not inline: usually empty, and the task is smaller
  if (!via_out) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (info.result_alias[i] >= 0) {
        into.resize(into.size() + meta.results[i].size());
        continue;
      }
      for (const at::Tensor& t : tensors_of(results[i])) into.push_back(t.defined() ? glue::HostView::of(t) : glue::HostView{});
    }
  }
  glue::Touches touches;  // only strict mode looks at them
  if (config().strict) {
    touches = call.touches();
    for (const auto& v : into) {
      if (v.data() != nullptr) touches.push_back(v.data());
    }
  }
  std::optional<c10::OperatorHandle> out_op = via_out ? info.out_variant : std::nullopt;
  glue::launch(device, op.schema().name().c_str(), std::move(touches), [call = std::move(call), op, out_op, into = std::move(into)] {
    call.guarded(op, into, [&] {
      std::vector<glue::HostView> outs;
      if (out_op) {
        try {
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
  });
  return results;
}

// Notes whether the CPU kernel warned, passing each warning on (to Python's
// warnings, in a thread that Python called into).
class WarningWatch : public c10::WarningHandler {
 public:
  WarningWatch() : next_(c10::WarningUtils::get_warning_handler()), guard_(this) {}
  void process(const c10::Warning& warning) override {
    if (holding_) return held_.push_back(warning);
    warned = true;
    next_->process(warning);
  }
  // Warnings from here on are held until release(): passed on, or dropped.
  void hold() { holding_ = true; }
  void release(bool pass_on) {
    holding_ = false;
    if (pass_on) {
      for (const auto& w : held_) process(w);
    }
    held_.clear();
  }
  bool warned = false;

 private:
  c10::WarningHandler* next_;
  c10::WarningUtils::WarningHandlerGuard guard_;
  bool holding_ = false;
  std::vector<c10::Warning> held_;
};

// A device tensor with what a CPU kernel returned: its values, layout, and
// conjugate and negative bits.
at::Tensor adopt(const at::Tensor& cpu) {
  if (!cpu.defined()) return cpu;
  at::Tensor stored = cpu;  // the values as stored, without the lazy bits
  if (stored.is_conj()) stored = stored._conj();
  if (stored.is_neg()) stored = stored._neg_view();
  TensorMeta m = meta_of(stored);
  if (!stored.is_non_overlapping_and_dense()) {
    const auto contiguous = c10::contiguous_strides(m.sizes);
    m.strides.assign(contiguous.begin(), contiguous.end());
  }
  at::Tensor t = allocate(m);
  if (t.numel() > 0) {
    glue::HostView view = glue::HostView::of(t);
    HostAccess access({view.data()});
    view.tensor().copy_(stored);
  }
  t._set_conj(cpu.is_conj());
  t._set_neg(cpu.is_neg());
  return t;
}

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.storage_offset() == b.storage_offset() && a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

// Makes what openreg hands back what the CPU kernel left (`out`): an argument
// or result it wrote in place takes the layout the kernel gave it (a kernel
// may transpose its out= tensor or set its conjugate bit), a result it
// computed elsewhere is copied in, or adopted when its layout differs. Returns
// whether anything differed from what openreg had prepared.
bool reconcile(const OpInfo& info, c10::ArrayRef<c10::IValue> args, const torch::jit::Stack& out, Results& results) {
  bool differed = false;
  for (size_t i = 0; i < out.size() && i < results.size(); ++i) {
    const int alias = info.result_alias[i];
    if (!out[i].isTensor() && !out[i].isTensorList()) {
      if (alias < 0) results[i] = out[i];  // a value the host needs (bool, int, ...)
      continue;
    }
    const Tensors computed = tensors_of(out[i]);
    Tensors mine = tensors_of(alias >= 0 ? args[alias] : results[i]);
    if (mine.size() != computed.size()) {
      TORCH_INTERNAL_ASSERT(alias < 0, "a CPU kernel changed the length of a list argument it writes");
      mine.assign(computed.size(), at::Tensor());
      differed = true;
    }
    for (size_t k = 0; k < computed.size(); ++k) {
      const at::Tensor& c = computed[k];
      at::Tensor& m = mine[k];
      if (!c.defined() || !m.defined()) {
        differed = differed || c.defined() != m.defined();
        m = adopt(c);
      } else if (c.storage().data() == glue::HostAlias::of(m).base) {  // written in place
        if (!same_layout(c, m)) {
          m.unsafeGetTensorImpl()->set_sizes_and_strides(c.sizes(), c.strides(), c.storage_offset());
          m._set_conj(c.is_conj());
          m._set_neg(c.is_neg());
          differed = true;
        }
      } else if (same_layout(c, m)) {
        glue::HostView view = glue::HostView::of(m);
        HostAccess access({view.data()});
        view.tensor().copy_(c);
      } else {
        m = adopt(c);
        differed = true;
      }
    }
    if (alias < 0 && out[i].isTensorList()) {
      results[i] = c10::List<at::Tensor>(std::vector<at::Tensor>(mine.begin(), mine.end()));
    } else if (alias < 0) {
      results[i] = mine.empty() ? c10::IValue() : c10::IValue(mine[0]);
    }
  }
  return differed;
}

// Runs the CPU kernel now, in the calling thread, after the work queued on the
// stream: its errors are raised here with their own type, its warnings are the
// caller's, and whatever it does to its outputs' layout is seen. With `meta`,
// the results are prepared as a queued call would prepare them, and the
// signature's verdict is recorded; without, the kernel's own results are
// adopted (data-dependent shapes, non-tensor results).
Results run_at_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                    c10::DeviceIndex device, const MetaResult* meta) {
  if (!openreg::in_task()) {  // a task's own calls run in place: its stream waits for it
    glue::checked([&] {
      auto& stream = openreg::current_stream(device);
      stream.wait_for(stream.last());
    });
  }
  if (meta != nullptr) prepare_written(args, *meta, /*reshape=*/false);
  HostCall call(args, info.generator_arg, device);
  const bool via_out = meta != nullptr && writes_via_out(info, *meta);
  Results results = meta != nullptr ? allocate_results(op, info, *meta, via_out ? &call : nullptr)
                                    : Results(op.schema().returns().size());
  WarningWatch watch;
  torch::jit::Stack out;
  {
    const glue::Touches touches = call.touches();
    HostAccess access(touches.data(), touches.size());
    try {
      glue::checked([&] {  // an input a failed task left invalid raises that failure
        call.guarded(op, {}, [&] {
          if (!via_out) {
            out = call.run(op);
            return;
          }
          watch.hold();  // an out= kernel that fails may have warned about its outputs first
          try {
            out = call.run(*info.out_variant, /*with_outs=*/true);
            watch.release(true);
          } catch (const c10::Error&) {
            watch.release(false);
            out = call.run(op);  // a real error is raised again here
            meta->functional_only = true;
          }
        });
      });
    } catch (const c10::Error& e) {
      if (std::string(e.what()).find("not resizable") == std::string::npos) throw;
      throw NeedsFallback{"its CPU kernel resizes device memory"};
    }
  }
  bool differed = reconcile(info, args, out, results);
  if (meta != nullptr && meta->verdict == Verdict::Unverified) {
    for (size_t i = 0; i < args.size() && !differed; ++i) {
      differed = meta->written[i] && !same_shape(args[i].toTensor(), *meta->written[i]);
    }
    meta->verdict = differed || watch.warned ? Verdict::AtCall : Verdict::Queue;
  }
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
    // new_empty_strided's wrapper only allocates (any strides, overlapping too), as it should.
    if (!op || name.name.rfind("aten::", 0) != 0 || name.name == "aten::new_empty_strided" ||
        op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      continue;
    }
    std::string unqualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib.impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
  }
  return true;
}();

}  // namespace

void generic_kernel(const c10::OperatorHandle& called, torch::jit::Stack* stack) {
  const c10::OperatorHandle& op = cpu_equivalent(called, stack);
  const size_t n = op.schema().arguments().size();
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

// Runs `op` on device memory; throws NeedsFallback for the CPU fallback.
static Results run_on_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const OpInfo& info = op_info(op);
  const c10::DeviceIndex device = common_device(op, args, info);
  c10::DeviceGuard guard(c10::Device(kOpenreg, device));
  TORCH_CHECK_NOT_IMPLEMENTED(info.has_cpu_kernel, "'",
                              op.schema().operator_name(), "' is not implemented for openreg: it has no CPU kernel "
                              "for openreg to run on device memory");
  if (info.view) return run_view(op, args, info);
  const bool host = info.host_result ||
                    (info.host_unless_training >= 0 && !args[info.host_unless_training].toBool()) ||
                    (info.cpu_indices_ok && has_mask_index(args));
  if (!host) {
    if (auto meta = infer_meta(op, args, /*use_cache=*/true)) {
      if (meta->verdict == Verdict::Queue && !openreg::in_task()) return run_async(op, args, info, device, *meta);
      return run_at_call(op, args, info, device, meta.get());
    }
  }
  return run_at_call(op, args, info, device, nullptr);
}

Results run_op(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  try {
    return run_on_device(op, args);
  } catch (const NeedsFallback& e) {
    torch::jit::Stack stack(args.begin(), args.end());  // owned copies: `args` may be borrowed
    cpu_fallback(op, &stack, e.reason);
    return Results(std::make_move_iterator(stack.begin()), std::make_move_iterator(stack.end()));
  }
}


// These have composite kernels, which win over the fallback: the first two
// only raise.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
  m.impl("convolution_backward_overrideable", torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
  // Their composite kernels decompose into slower or less exact steps than
  // the CPU kernels, which serve them directly.
  for (const char* name : {"native_group_norm", "addr", "addr.out", "_stack", "_stack.out",
                           "any.dims_out", "all.dims_out", "linalg__powsum"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
  }
  // Their composite kernels accept only CPU, CUDA and XPU tensors (a device
  // allow-list); run on the host's memory views, they take the CPU's path.
  for (const char* name : {"mode.values"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&generic_kernel>());
  }
}
}  // namespace openreg::eager
