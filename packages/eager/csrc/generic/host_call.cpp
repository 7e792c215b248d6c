#include "host_call.h"

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <mutex>

#include "cuda_dtypes.h"
#include "first_equal.h"
#include "openreg/core/graph.h"
#include "openreg/glue/generator.h"

namespace openreg::eager {

at::Generator device_generator(const c10::IValue& arg, c10::DeviceIndex device) {
  at::Generator gen = arg.isNone() ? glue::default_generator(device) : arg.toGenerator();
  // ATen's check_generator sentence, as CUDA's kernels give it.
  TORCH_CHECK(gen.device().type() == c10::DeviceType::PrivateUse1, "Expected a '", c10::DeviceType::PrivateUse1,
              "' device type for generator but found '", gen.device().type(), "'");
  return gen;
}

namespace {

glue::Generator& as_openreg(const at::Generator& gen) {
  auto* dev = dynamic_cast<glue::Generator*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(dev != nullptr, "expected an openreg generator, but got another on ", gen.device());
  return *dev;
}

}  // namespace

at::Generator take_state(const at::Generator& gen) { return as_openreg(gen).take_launch(); }

namespace {

at::Tensor read_now(const at::Tensor& t) {
  // Python numbers arrive as fresh wrapped tensors that nothing else holds.
  return t.defined() && t.is_cpu() && !t.unsafeGetTensorImpl()->is_wrapped_number() ? t.clone() : t;
}

// A graph's replays run with the Python numbers captured: what the CPU kernel
// would cast one to at every call (TensorIterator's common dtype: that of the
// floating tensors, when they share a full-precision one), it is cast to once.
// Reduced and complex dtypes are left as given (their kernels may read the
// number at double precision).
void cast_numbers_once(torch::jit::Stack& stack) {
  std::optional<at::ScalarType> common;
  auto numbers = [](const c10::IValue& v) {
    return v.isTensor() && v.toTensor().defined() && v.toTensor().unsafeGetTensorImpl()->is_wrapped_number();
  };
  for (const auto& v : stack) {
    if (!v.isTensor() || !v.toTensor().defined() || numbers(v)) continue;
    const at::ScalarType dtype = v.toTensor().scalar_type();
    if (at::isComplexType(dtype) || (at::isFloatingType(dtype) && common && *common != dtype)) return;
    if (at::isFloatingType(dtype)) common = dtype;
  }
  if (common != at::kFloat && common != at::kDouble) return;
  for (auto& v : stack) {
    if (!numbers(v) || at::isComplexType(v.toTensor().scalar_type()) || v.toTensor().scalar_type() == *common) continue;
    at::Tensor cast = v.toTensor().to(*common);
    cast.unsafeGetTensorImpl()->set_wrapped_number(true);
    v = std::move(cast);
  }
}

}  // namespace

HostCall::HostCall(c10::ArrayRef<c10::IValue> args, int generator_arg, c10::DeviceIndex device, bool growable)
    : generator_arg_(generator_arg), growable_(growable) {
  Seen seen;
  for (const auto& a : args) capture(a, &seen);
  link_views(seen);
  n_inputs_ = static_cast<int>(values_.size());
  std::optional<at::Generator> gen;
  Stream& stream = openreg::current_stream(device);
  const bool capturing = is_capturing(stream);
  if (generator_arg >= 0) {
    gen = device_generator(args[generator_arg], device);
    // A captured launch draws nothing now: it takes an offset relative to each replay's, as CUDA's do.
    if (!capturing) snapshot_ = take_state(*gen);
  }
  if (!capturing) return;
  replayed_ = std::make_shared<Replayed>();
  if (gen) {
    on_replay(stream, [replayed = replayed_, gen = *gen, launch = as_openreg(*gen).take_captured()] {
      at::Generator state = as_openreg(gen).take_replayed(launch);
      std::lock_guard<std::mutex> lock(replayed->mu);
      replayed->states.push_back(std::move(state));
    });
  }
}

void HostCall::capture(const c10::IValue& v, Seen* seen) {
  auto is_device = [](const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; };
  if (v.isTensor() && is_device(v.toTensor())) {
    add_view(v.toTensor(), -1, seen);
    values_.emplace_back();
  } else if (v.isTensorList() || v.isOptionalTensorList()) {
    int element = 0;
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && is_device(e.toTensor())) add_view(e.toTensor(), element, seen);
      ++element;
    }
    // Device elements are left undefined (arguments() sets them): holding them would cost two atomic
    // operations each, and torch.cat takes thousands.
    if (v.isTensorList()) {
      c10::List<at::Tensor> now;
      now.reserve(v.toListRef().size());
      for (const at::Tensor& t : v.toTensorList()) now.push_back(is_device(t) ? at::Tensor() : read_now(t));
      values_.emplace_back(now);
    } else {
      c10::List<std::optional<at::Tensor>> now;
      now.reserve(v.toListRef().size());
      for (const c10::IValue& e : v.toListRef()) {
        const bool keep = !e.isNone() && !is_device(e.toTensor());
        now.push_back(keep ? std::optional<at::Tensor>(read_now(e.toTensor())) : std::nullopt);
      }
      values_.emplace_back(now);
    }
  } else if (v.isTensor()) {
    values_.emplace_back(read_now(v.toTensor()));
  } else if (v.isDevice()) {
    values_.emplace_back(c10::Device(at::kCPU));
  } else {
    values_.push_back(v);
  }
}

void HostCall::add_view(const at::Tensor& t, int element, Seen* seen) {
  if (seen != nullptr) seen->push_back(t.unsafeGetTensorImpl());
  const auto at = static_cast<uint32_t>(shapes_.size());
  shapes_.append(t.sizes().begin(), t.sizes().end());
  shapes_.append(t.strides().begin(), t.strides().end());
  views_.push_back(View{glue::HostAlias::of(t), element, at, static_cast<int16_t>(values_.size()),
                        static_cast<uint16_t>(t.dim()), -1, -1});
}

void HostCall::link_views(const Seen& seen) {
  const auto tensor = first_equal(seen.size(), [&](int32_t i) { return seen[i]; });
  const auto memory =
      first_equal(seen.size(), [&](int32_t i) { return std::make_pair(views_[i].alias.base, views_[i].alias.nbytes); });
  for (size_t i = 0; i < seen.size(); ++i) {
    View& v = views_[i];
    if (tensor[i] != static_cast<int32_t>(i)) v.same_as = tensor[i];
    // Tensors without memory share none (linalg_qr takes two such out= tensors for one).
    if (memory[i] != static_cast<int32_t>(i) && v.alias.base != nullptr) v.storage_as = memory[i];
  }
}

glue::HostView HostCall::view(const View& v) const {
  return glue::HostView(v.alias, v.sizes(shapes_.data()), v.strides(shapes_.data()));
}

void HostCall::add_out(const at::Tensor& t) { capture(t); }

std::vector<glue::HostView> HostCall::outs() const {
  std::vector<glue::HostView> outs;
  for (const View& v : views_) {
    if (v.arg >= n_inputs_) outs.push_back(view(v));
  }
  return outs;
}

bool HostCall::writes(const View& v, const c10::FunctionSchema& op) const {
  const auto arg = static_cast<size_t>(v.arg);
  const auto& schema = op.arguments();
  return v.arg >= n_inputs_ || (arg < schema.size() && schema[arg].alias_info() && schema[arg].alias_info()->isWrite());
}

glue::Touches HostCall::touches(const c10::FunctionSchema& op) const {
  glue::Touches touches;
  // The whole allocation: a kernel may resize an out= tensor within its storage.
  for (const View& v : views_) touches.emplace_back(v.alias.nbytes > 0 ? v.alias.base : nullptr, writes(v, op));
  return touches;
}

void HostCall::guarded(const c10::OperatorHandle& op, c10::ArrayRef<glue::HostView> extra,
                       std::optional<uint64_t> queued_at, c10::function_ref<void()> kernel) const {
  if (replayed_) {
    std::lock_guard<std::mutex> lock(replayed_->mu);
    if (!replayed_->states.empty()) {
      snapshot_ = std::move(replayed_->states.front());
      replayed_->states.pop_front();
    }
  }
  const auto& schema = op.schema().arguments();
  // At the call, a failure is the caller's (as on the CPU) and the clock is now.
  const uint64_t launched_at = queued_at.value_or(allocation_clock());
  auto mark = [&](const std::shared_ptr<const AsyncError>& failure) {
    if (failure && !queued_at) return;
    auto set = [&](const void* base) { failure ? poison(base, launched_at, failure) : unpoison(base, launched_at); };
    for (const View& v : views_) {
      if (writes(v, op.schema())) set(v.alias.base);
    }
    for (const auto& e : extra) {
      if (e.base != nullptr) set(e.base);
    }
  };
  for (const View& v : views_) {
    if (v.arg >= n_inputs_ || schema[v.arg].is_out()) continue;
    if (auto failure = poisoned(v.alias.base)) {
      mark(failure);
      throw AsyncError(failure->what(), failure->cause);
    }
  }
  try {
    kernel();
  } catch (const c10::Error& e) {
    mark(std::make_shared<const AsyncError>(
        "'" + op.schema().name() + "' failed, so its result is not valid: " + e.what_without_backtrace(),
        std::current_exception()));
    throw;
  }
  mark(nullptr);
}

torch::jit::Stack HostCall::run(const c10::OperatorHandle& op, bool with_outs, torch::jit::Stack* given) const {
  auto build = [&] {
    torch::jit::Stack stack;
    if (replayed_) {
      std::call_once(replayed_->built[with_outs], [&] {
        replayed_->stacks[with_outs] = arguments(with_outs);
        cast_numbers_once(replayed_->stacks[with_outs]);
      });
      stack = replayed_->stacks[with_outs];
    } else {
      stack = arguments(with_outs);
    }
    if (generator_arg_ >= 0) stack[generator_arg_] = snapshot_.clone();  // a retry draws the same numbers
    return stack;
  };
  torch::jit::Stack stack = build();
  if (given != nullptr) *given = stack;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  } catch (const c10::Error&) {
    torch::jit::Stack retry = build();        // `given` keeps what the failed kernel left
    const torch::jit::Stack retried = retry;  // its arguments, which the call replaces with its results
    if (!call_in_cuda_dtype(op, &retry)) throw;
    if (given != nullptr) *given = retried;
    stack = std::move(retry);
  }
  return stack;
}

torch::jit::Stack HostCall::arguments(bool with_outs) const {
  const int n = with_outs ? static_cast<int>(values_.size()) : n_inputs_;
  torch::jit::Stack stack(values_.begin(), values_.begin() + n);
  int copied = -1;  // the list argument last copied, so that the host's list stays as given
  auto built = [&](int32_t i) -> at::Tensor {
    const View& v = views_[i];
    return v.element < 0 ? stack[v.arg].toTensor() : stack[v.arg].toList().get(v.element).toTensor();
  };
  for (const View& v : views_) {
    if (v.arg >= n) break;
    at::Tensor t;
    if (v.same_as >= 0) {
      t = built(v.same_as);
    } else {
      // Only the caller's tensors grow (an out= op it called): a result openreg allocated for an out= overload
      // has its meta shape, and a kernel that would grow it computes functionally instead.
      c10::Storage storage =
          v.storage_as >= 0 ? built(v.storage_as).storage() : v.alias.storage(growable_ && v.arg < n_inputs_);
      t = v.alias.tensor(std::move(storage), v.sizes(shapes_.data()), v.strides(shapes_.data()));
    }
    if (v.element < 0) {
      stack[v.arg] = std::move(t);
      continue;
    }
    if (copied != v.arg) {
      stack[v.arg] = stack[v.arg].toList().copy();
      copied = v.arg;
    }
    stack[v.arg].toList().set(v.element, std::move(t));
  }
  return stack;
}

}  // namespace openreg::eager
