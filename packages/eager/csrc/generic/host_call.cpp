#include "host_call.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <mutex>

#include "openreg/glue/generator.h"

namespace openreg::eager {

namespace {

// Takes the device generator's state for one launch and moves the generator
// on to a state derived from it, so the next launch draws fresh numbers
// whatever this one consumes. initial_seed() is kept.
at::Generator take_state(const at::Generator& device_generator) {
  auto* dev = device_generator.get<at::CPUGeneratorImpl>();
  at::Generator snapshot = at::make_generator<at::CPUGeneratorImpl>();
  auto* snap = snapshot.get<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(const_cast<at::Generator&>(device_generator).mutex());
  snap->set_engine(dev->engine());
  snap->set_next_float_normal_sample(dev->next_float_normal_sample());
  snap->set_next_double_normal_sample(dev->next_double_normal_sample());
  at::mt19937 derive = dev->engine();
  const uint64_t next_seed = (static_cast<uint64_t>(derive()) << 32) | derive();
  auto state = at::mt19937(next_seed).data();
  state.seed_ = dev->engine().seed();
  at::mt19937 next;
  next.set_data(state);
  dev->set_engine(next);
  dev->set_next_float_normal_sample(std::nullopt);
  dev->set_next_double_normal_sample(std::nullopt);
  return snapshot;
}

at::Tensor read_now(const at::Tensor& t) {
  // Python numbers arrive as fresh wrapped tensors that nothing else holds.
  return t.defined() && t.is_cpu() && !t.unsafeGetTensorImpl()->is_wrapped_number() ? t.clone() : t;
}

}  // namespace

HostCall::HostCall(c10::ArrayRef<c10::IValue> args, int generator_arg, c10::DeviceIndex device)
    : generator_arg_(generator_arg) {
  args_.reserve(args.size() + 2);
  for (const auto& a : args) capture(a);
  n_inputs_ = args_.size();
  if (generator_arg >= 0) {
    const auto& g = args[generator_arg];
    const at::Generator& gen = g.isNone() ? glue::default_generator(device) : g.toGenerator();
    TORCH_CHECK(gen.device().type() == c10::DeviceType::PrivateUse1, "expected a generator on openreg, but got one on ",
                gen.device());
    snapshot_ = take_state(gen);
  }
}

void HostCall::capture(const c10::IValue& v) {
  auto is_device = [](const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; };
  auto view_of = [&](const at::Tensor& t) {
    auto view = glue::HostView::of(t);
    touches_.push_back(view.data);
    return view;
  };
  Arg& arg = args_.emplace_back();  // in place: an Arg is large
  if (v.isTensor() && is_device(v.toTensor())) {
    arg.view = view_of(v.toTensor());
  } else if (v.isTensorList() || v.isOptionalTensorList()) {
    arg.optional_list = v.isOptionalTensorList();
    bool any = false;
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && is_device(e.toTensor())) {
        arg.list.push_back(view_of(e.toTensor()));
        any = true;
      } else {
        arg.list.push_back(std::nullopt);
      }
    }
    if (!any) arg.list.clear();
    if (v.isTensorList()) {
      c10::List<at::Tensor> now;
      for (const at::Tensor& t : v.toTensorList()) now.push_back(read_now(t));
      arg.value = now;
    } else {
      c10::List<std::optional<at::Tensor>> now;
      for (const c10::IValue& e : v.toListRef()) {
        now.push_back(e.isNone() ? std::nullopt : std::optional<at::Tensor>(read_now(e.toTensor())));
      }
      arg.value = now;
    }
  } else if (v.isTensor()) {
    arg.value = read_now(v.toTensor());
  } else if (v.isDevice()) {
    arg.value = c10::Device(at::kCPU);
  } else {
    arg.value = v;
  }
}

void HostCall::add_out(const at::Tensor& t) { capture(t); }

c10::SmallVector<glue::HostView, 1> HostCall::outs() const {
  c10::SmallVector<glue::HostView, 1> outs;
  for (size_t i = n_inputs_; i < args_.size(); ++i) outs.push_back(*args_[i].view);
  return outs;
}

torch::jit::Stack HostCall::run(const c10::OperatorHandle& op, bool with_outs) const {
  torch::jit::Stack stack;
  stack.reserve(args_.size());
  for (size_t i = 0; i < (with_outs ? args_.size() : n_inputs_); ++i) {
    const Arg& a = args_[i];
    if (a.view) {
      stack.emplace_back(a.view->tensor());
    } else if (!a.list.empty()) {
      const auto given = a.value.toListRef();
      if (a.optional_list) {
        c10::List<std::optional<at::Tensor>> out;
        for (size_t i = 0; i < given.size(); ++i) {
          out.push_back(a.list[i] ? std::optional<at::Tensor>(a.list[i]->tensor())
                                  : (given[i].isNone() ? std::nullopt : std::optional<at::Tensor>(given[i].toTensor())));
        }
        stack.emplace_back(out);
      } else {
        c10::List<at::Tensor> out;
        for (size_t i = 0; i < given.size(); ++i) out.push_back(a.list[i] ? a.list[i]->tensor() : given[i].toTensor());
        stack.emplace_back(out);
      }
    } else {
      stack.push_back(a.value);
    }
  }
  if (generator_arg_ >= 0) stack[generator_arg_] = snapshot_.clone();  // a retry draws the same numbers
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  return stack;
}

}  // namespace openreg::eager
