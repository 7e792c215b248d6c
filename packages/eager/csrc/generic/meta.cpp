#include "meta.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "first_equal.h"
#include "openreg/glue/kernel_warnings.h"
#include "openreg/glue/launch.h"
#include "results.h"

namespace openreg::eager {
namespace {

constexpr size_t kMaxEntries = 1 << 16;

// An argument signature as bytes, built at every launch: plain stores into a
// buffer that only grows (std::string::append costs a call per field).
class Key {
 public:
  void clear() { size_ = 0; }
  void put_bytes(const void* p, size_t n) {
    if (size_ + n > buf_.size()) buf_.resize(std::max(2 * buf_.size(), size_ + n));
    std::memcpy(buf_.data() + size_, p, n);
    size_ += n;
  }
  std::string_view view() const { return {buf_.data(), size_}; }

 private:
  std::string buf_ = std::string(512, '\0');
  size_t size_ = 0;
};

template <typename T>
void put(Key& key, const T& v) {
  key.put_bytes(&v, sizeof(T));
}

void put_array(Key& key, c10::IntArrayRef a) { key.put_bytes(a.data(), a.size() * sizeof(int64_t)); }

void put_tensor(Key& key, const at::Tensor& t) {
  if (!t.defined()) return put(key, 'u');
  const auto* impl = t.unsafeGetTensorImpl();
  struct Head {
    char tag;
    at::ScalarType dtype;
    c10::DeviceType device;
    uint8_t bits;  // wrapped number, conjugate, negative
    int32_t dim;
  };
  static_assert(std::has_unique_object_representations_v<Head>, "padding bytes would make equal keys differ");
  const auto bits = static_cast<uint8_t>(impl->is_wrapped_number() | impl->is_conj() << 1 | impl->is_neg() << 2);
  put(key, Head{'t', t.scalar_type(), impl->device_type(), bits, static_cast<int32_t>(impl->dim())});
  put_array(key, impl->sizes());
  put_array(key, impl->strides());
}

void put_value(Key& key, const c10::IValue& v) {
  if (v.isTensor()) return put_tensor(key, v.toTensor());
  if (v.isNone()) return put(key, 'n');
  if (v.isInt()) return put(key, 'i'), put(key, v.toInt());
  if (v.isDouble()) return put(key, 'd'), put(key, v.toDouble());
  if (v.isBool()) return put(key, 'b'), put(key, v.toBool());
  if (v.isIntList()) {
    put(key, 'I');
    const auto list = v.toIntList();
    put(key, list.size());
    for (int64_t i : list) put(key, i);
    return;
  }
  if (v.isList()) {
    put(key, 'L');
    for (const c10::IValue& e : v.toListRef()) put_value(key, e);
    return put(key, ']');
  }
  if (v.isString()) {
    const auto& str = v.toStringRef();
    return put(key, 's'), key.put_bytes(str.data(), str.size()), put(key, '\0');
  }
  if (v.isDevice()) return put(key, 'D'), put(key, v.toDevice().type());
  if (v.isGenerator()) return put(key, 'g');
  // Anything else (Scalar types, complex, ...) by its printed form.
  std::ostringstream s;
  s << '?' << *v.type() << v;
  const std::string printed = s.str();
  key.put_bytes(printed.data(), printed.size());
}

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || t.is_meta() || (t.is_cpu() && t.dim() == 0)) return t;
  int64_t span = t.storage_offset() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) span = t.storage_offset();
    span += (t.size(d) - 1) * t.stride(d);
  }
  auto base = at::empty({std::max<int64_t>(span, 0)}, t.options().device(at::kMeta));
  at::Tensor meta = base.as_strided(t.sizes(), t.strides(), t.storage_offset());
  // The math bits too: some kernels refuse them (view_as_real of a conjugated tensor).
  meta._set_conj(t.is_conj());
  meta._set_neg(t.is_neg());
  return meta;
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_meta(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef()) {
      out.push_back(e.isNone() ? std::nullopt : std::optional<at::Tensor>(to_meta(e.toTensor())));
    }
    return out;
  }
  if (v.isDevice()) return c10::Device(at::kMeta);
  return v;
}

std::vector<TensorMeta> metas_of(const c10::IValue& v) {
  std::vector<TensorMeta> out;
  if (v.isTensor()) {
    out.push_back(meta_of(v.toTensor()));
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) out.push_back(meta_of(t));
  }
  return out;
}

// Device tensors that share memory (x[1:] and x[:-1]): overlap checks depend on
// which ones do and where each starts, so these are part of the signature.
void put_sharing(Key& key, c10::ArrayRef<c10::IValue> args) {
  c10::SmallVector<const c10::TensorImpl*, 8> device;
  auto add = [&](const c10::IValue& v) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
      device.push_back(v.toTensor().unsafeGetTensorImpl());
    }
  };
  for (const auto& a : args) {
    if (a.isTensorList() || a.isOptionalTensorList()) {
      for (const c10::IValue& e : a.toListRef()) add(e);
    } else {
      add(a);
    }
  }
  const auto first =
      first_equal(device.size(), [&](int32_t i) { return device[i]->unsafe_storage().unsafeGetStorageImpl(); });
  bool shared = false;
  for (size_t i = 0; i < device.size(); ++i) shared |= first[i] != static_cast<int32_t>(i);
  if (!shared) return;
  put(key, 'S');
  for (size_t i = 0; i < device.size(); ++i) put(key, first[i]), put(key, device[i]->storage_offset());
}

void put_global_state(Key& key) {
  const auto& ctx = at::globalContext();
  struct State {
    at::ScalarType default_dtype;
    bool deterministic, warn_only;
  };
  static_assert(std::has_unique_object_representations_v<State>, "padding bytes would make equal keys differ");
  put(key, State{c10::typeMetaToScalarType(c10::get_default_dtype()), ctx.deterministicAlgorithms(),
                 ctx.deterministicAlgorithmsWarnOnly()});
}

// An op that updates its arguments in place and returns nothing: one without a meta kernel (the fused SGD and
// Adagrad steps; torch has Adam's) leaves them their layouts, which is all the queue needs of a meta kernel, and
// its signature's first call, at the call, checks the rest. Else it would wait for the device at every step,
// which a graph capture refuses.
bool updates_in_place(const c10::FunctionSchema& schema) {
  if (!schema.returns().empty()) return false;
  for (const auto& a : schema.arguments()) {
    if (a.alias_info() != nullptr && a.alias_info()->isWrite()) return true;
  }
  return false;
}

std::shared_ptr<const MetaResult> run_on_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                              bool rethrow) {
  torch::jit::Stack stack;
  stack.reserve(args.size());
  const auto& schema = op.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    // An out= tensor as an empty one: the meta kernel then gives it the result's
    // shape without warning about a resize that the CPU kernel may not make
    // (Python meta kernels warn through Python's warnings, past any handler).
    const bool out = schema[i].is_out() && args[i].isTensor() && args[i].toTensor().defined();
    stack.push_back(out ? at::empty({0}, args[i].toTensor().options().device(at::kMeta)) : to_meta(args[i]));
  }
  const std::vector<c10::IValue> inputs = stack;  // the meta arguments, to see what out= did to them
  // A probe of openreg's own: the CPU kernel gives the user its warnings (a
  // view op's meta kernel is the view op itself, `rethrow`).
  glue::kernel_warnings::Discard discard;
  std::optional<c10::WarningUtils::WarningHandlerGuard> quiet;
  if (!rethrow) quiet.emplace(&discard);
  try {
    glue::WorkerDispatchState as_on_the_device;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &stack);
  } catch (const c10::NotImplementedError&) {  // torch's Meta fallback: no meta kernel
    if (rethrow) throw;
    if (!updates_in_place(op.schema())) return nullptr;
    stack.clear();
  } catch (const std::exception&) {
    if (rethrow) throw;
    return nullptr;
  }
  auto result = std::make_shared<MetaResult>();
  for (const auto& r : stack) result->results.push_back(metas_of(r));
  for (const auto& r : result->results) {
    for (const auto& m : r) result->elements += c10::multiply_integers(m.sizes);
  }
  for (const auto& a : args) {
    for (const at::Tensor& t : tensors_of(a)) result->elements += t.defined() && !t.is_nested() ? t.numel() : 0;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* alias = schema[i].alias_info();
    bool written = alias != nullptr && alias->isWrite() && inputs[i].isTensor() && inputs[i].toTensor().defined();
    result->written.push_back(written ? std::optional<TensorMeta>(meta_of(inputs[i].toTensor())) : std::nullopt);
  }
  return result;
}

}  // namespace

TensorMeta meta_of(const at::Tensor& t) {
  if (!t.defined()) return TensorMeta{at::ScalarType::Undefined, {}, {}, 0, false};
  return TensorMeta{t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset()};
}

std::shared_ptr<const MetaResult> infer_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                             bool use_cache, bool rethrow) {
  if (!use_cache) return run_on_meta(op, args, rethrow);
  // Per thread, so a hit takes no lock; a thread works out each signature once.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Cache {
    Key key;  // reused: a hit allocates nothing
    std::unordered_map<std::string, std::shared_ptr<const MetaResult>, Hash, std::equal_to<>> results;
  };
  thread_local Cache cache;
  cache.key.clear();
  put(cache.key, &op.schema());
  for (const auto& a : args) put_value(cache.key, a);
  put_sharing(cache.key, args);
  put_global_state(cache.key);
  auto it = cache.results.find(cache.key.view());
  if (it != cache.results.end()) return it->second;
  std::string miss(cache.key.view());  // the meta run may launch nested lookups that reuse the key
  auto result = run_on_meta(op, args, rethrow);
  if (cache.results.size() >= kMaxEntries) cache.results.clear();
  cache.results.emplace(std::move(miss), result);
  return result;
}

}  // namespace openreg::eager
