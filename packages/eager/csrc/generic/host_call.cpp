#include "host_call.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <mutex>

#include "openreg/glue/generator.h"

namespace openreg::eager {

HostCall::HostCall(c10::ArrayRef<c10::IValue> args, int generator_arg, c10::DeviceIndex device)
    : generator_arg_(generator_arg) {
  args_.reserve(args.size());
  for (const auto& a : args) args_.push_back(capture(a));
  if (generator_arg >= 0) {
    const auto& g = args[generator_arg];
    generator_ = g.isNone() ? glue::default_generator(device) : g.toGenerator();
    TORCH_CHECK(generator_.device().type() == c10::DeviceType::PrivateUse1, "expected a generator on openreg, but got one on ",
                generator_.device());
  }
}

HostCall::Arg HostCall::capture(const c10::IValue& v) {
  auto is_device = [](const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; };
  auto view_of = [&](const at::Tensor& t) {
    auto view = glue::HostView::of(t);
    touches_.push_back(view.data);
    return view;
  };
  Arg arg;
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
    arg.value = v;  // keeps CPU members alive and supplies them at run time
  } else if (v.isDevice()) {
    arg.value = c10::Device(at::kCPU);
  } else {
    arg.value = v;
  }
  return arg;
}

void HostCall::add_out(const at::Tensor& t) { args_.push_back(capture(t)); }

torch::jit::Stack HostCall::run(const c10::OperatorHandle& op) const {
  torch::jit::Stack stack;
  stack.reserve(args_.size());
  for (const Arg& a : args_) {
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
  if (generator_arg_ < 0) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
    return stack;
  }
  // CPU kernels only draw from CPU generators: lend the device generator's
  // state to a CPU one for the call, and take it back afterwards.
  auto* device_gen = generator_.get<at::CPUGeneratorImpl>();
  std::lock_guard<std::mutex> lock(generator_.mutex());
  thread_local at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>();
  auto* cpu_gen = cpu.get<at::CPUGeneratorImpl>();
  cpu_gen->set_engine(device_gen->engine());
  cpu_gen->set_next_float_normal_sample(device_gen->next_float_normal_sample());
  cpu_gen->set_next_double_normal_sample(device_gen->next_double_normal_sample());
  stack[generator_arg_] = cpu;
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  device_gen->set_engine(cpu_gen->engine());
  device_gen->set_next_float_normal_sample(cpu_gen->next_float_normal_sample());
  device_gen->set_next_double_normal_sample(cpu_gen->next_double_normal_sample());
  return stack;
}

}  // namespace openreg::eager
