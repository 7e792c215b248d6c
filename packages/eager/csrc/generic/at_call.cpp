#include "at_call.h"

#include <c10/util/Exception.h>

#include <vector>

#include "host_call.h"
#include "openreg/core/stream.h"
#include "openreg/core/trace.h"
#include "openreg/glue/launch.h"
#include "results.h"

namespace openreg::eager {
namespace {

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

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.storage_offset() == b.storage_offset() && a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

void take_layout(const at::Tensor& m, const at::Tensor& c) {
  m.unsafeGetTensorImpl()->set_sizes_and_strides(c.sizes(), c.strides(), c.storage_offset());
  m._set_conj(c.is_conj());
  m._set_neg(c.is_neg());
}

// `m`, a device tensor the CPU kernel wrote as `c`, takes the layout the kernel left and the storage it grew.
// Returns whether anything changed.
bool take_written(const at::Tensor& m, const at::Tensor& c) {
  if (c.storage().data() != glue::HostAlias::of(m).base) {
    grow_on_device(m.storage(), c.storage());
  } else if (same_layout(c, m)) {
    return false;
  }
  take_layout(m, c);
  return true;
}

// The caller sees the arguments the kernel wrote as it left them (`given`: its arguments), whether it returns
// them or not (the fused observer resizes its empty running minimum and maximum, which its meta kernel does not
// model), and when it fails (ATen resizes out= tensors before it finds a value it refuses). Returns whether
// anything changed.
bool take_written_args(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                       const torch::jit::Stack& given) {
  bool changed = false;
  for (size_t i = 0; i < args.size() && i < given.size(); ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || !args[i].isTensor() || !given[i].isTensor()) continue;
    if (args[i].toTensor().defined()) changed = take_written(args[i].toTensor(), given[i].toTensor()) || changed;
  }
  return changed;
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
      } else if (alias >= 0 || c.storage().data() == glue::HostAlias::of(m).base) {  // written in place
        differed = take_written(m, c) || differed;
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

}  // namespace

void wait_for_queued_work(c10::DeviceIndex device, const char* call) {
  if (openreg::in_task()) return;  // a task's own calls run in place: its stream waits for it
  glue::checked([&] {
    auto& stream = openreg::current_stream(device);
    stream.wait_for(stream.last(), call);
  });
}

InStreamOrder::InStreamOrder(c10::DeviceIndex device, const char* call) {
  if (openreg::in_task()) return;
  glue::checked([&] { held_.emplace(openreg::current_stream(device), call); });
}

Results run_at_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                    c10::DeviceIndex device, const MetaResult* meta) {
  // With a meta result the op is one the device queues, run here on its first call: on a GPU the host would not
  // have waited, so for the stream sanitizer it has not.
  std::optional<sanitizer::AsIfQueued> as_if_queued;
  if (meta != nullptr) as_if_queued.emplace();
  const InStreamOrder in_order(device, op.schema().name().c_str());
  HostCall call(args, info.generator_arg, device, /*growable=*/true);
  // A first call whose meta kernel lays out a result non-contiguously runs the functional form, which shows the
  // layout the CPU gives: some CPU out= kernels write their outputs as if contiguous, the layout ATen's own meta
  // function asked for, where the Python meta kernel openreg works shapes out with says otherwise
  // (_log_softmax_backward_data of a transposed gradient).
  const bool probing = meta != nullptr && meta->verdict == Verdict::Unverified && lays_out_strided(info, *meta);
  const bool via_out = meta != nullptr && writes_via_out(info, *meta) && !probing;
  Results results = meta != nullptr ? allocate_results(op, info, *meta, via_out ? &call : nullptr)
                                    : Results(op.schema().returns().size());
  WarningWatch watch;
  torch::jit::Stack out;
  torch::jit::Stack given;  // the arguments of the CPU kernel run last
  // The device's work, though the host does it here: profilers show it on the stream, as a queued kernel
  // (in a task, it is part of that task's).
  const int64_t traced = trace::on() && !openreg::in_task() ? trace::now() : 0;
  {
    const glue::Touches touches = call.touches(op.schema());
    if (sanitizer::on()) {
      glue::checked([&] {
        sanitizer::host_work(openreg::current_stream(device), op.schema().name().c_str(), touches.data(),
                             touches.size());
      });
    }
    HostAccess access(touches.data(), touches.size());
    glue::WorkerDispatchState as_on_the_device;
    const auto kernel = [&] {
      if (!via_out) {
        out = call.run(op, /*with_outs=*/false, &given);
        return;
      }
      watch.hold();  // an out= kernel that fails may have warned about its outputs first
      try {
        OwnOutputs own;
        out = call.run(*info.out_variant, /*with_outs=*/true);
        watch.release(true);
      } catch (const c10::Error&) {
        watch.release(false);
        out = call.run(op, /*with_outs=*/false, &given);  // a real error is raised again here
        meta->functional_only = true;
      }
    };
    try {
      // An input a failed task left invalid raises that failure.
      glue::checked([&] { call.guarded(op, {}, std::nullopt, kernel); });
    } catch (...) {
      take_written_args(op.schema(), args, given);
      throw;
    }
  }
  if (traced != 0) trace::ran_here(openreg::current_stream(device), op.schema().name().c_str(), traced);
  bool differed = reconcile(info, args, out, results);
  differed = take_written_args(op.schema(), args, given) || differed;
  if (probing && differed) meta->functional_only = true;  // the out= kernel would write the meta kernel's layout
  if (meta != nullptr && meta->verdict == Verdict::Unverified) {
    for (size_t i = 0; i < args.size() && !differed; ++i) {
      differed = meta->written[i] && !same_shape(args[i].toTensor(), *meta->written[i]);
    }
    meta->verdict = differed || watch.warned ? Verdict::AtCall : Verdict::Queue;
  }
  return results;
}

}  // namespace openreg::eager
