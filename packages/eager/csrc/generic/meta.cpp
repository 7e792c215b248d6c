#include "meta.h"

#include <ATen/ATen.h>

#include <cstring>
#include <string>
#include <unordered_map>

namespace openreg::eager {
namespace {

constexpr size_t kMaxEntries = 1 << 16;

template <typename T>
void put(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_array(std::string& key, c10::IntArrayRef a) {
  key.append(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(int64_t));
}

void put_tensor(std::string& key, const at::Tensor& t) {
  if (!t.defined()) return put(key, 'u');
  put(key, 't');
  put(key, t.scalar_type());
  put(key, t.device().type());
  put(key, t.unsafeGetTensorImpl()->is_wrapped_number());
  put(key, static_cast<int64_t>(t.dim()));
  put_array(key, t.sizes());
  put_array(key, t.strides());
}

void put_value(std::string& key, const c10::IValue& v) {
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
  if (v.isString()) return put(key, 's'), key.append(v.toStringRef()), put(key, '\0');
  if (v.isDevice()) return put(key, 'D'), put(key, v.toDevice().type());
  if (v.isGenerator()) return put(key, 'g');
  // Anything else (Scalar types, complex, ...) by its printed form.
  put(key, '?');
  key.append(c10::toString(v.type()));
  std::ostringstream s;
  s << v;
  key.append(s.str());
}

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || t.is_meta() || (t.is_cpu() && t.dim() == 0)) return t;
  int64_t span = t.storage_offset() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) span = t.storage_offset();
    span += (t.size(d) - 1) * t.stride(d);
  }
  auto base = at::empty({std::max<int64_t>(span, 0)}, t.options().device(at::kMeta));
  return base.as_strided(t.sizes(), t.strides(), t.storage_offset());
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

std::shared_ptr<const MetaResult> run_on_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const auto& a : args) stack.push_back(to_meta(a));
  const std::vector<c10::IValue> inputs = stack;  // the meta arguments, to see what out= did to them
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &stack);
  } catch (const std::exception&) {
    return nullptr;
  }
  auto result = std::make_shared<MetaResult>();
  for (const auto& r : stack) result->results.push_back(metas_of(r));
  const auto& schema = op.schema().arguments();
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
                                             bool use_cache) {
  if (!use_cache) return run_on_meta(op, args);
  thread_local std::string key;  // reused: a cache hit allocates nothing
  key.clear();
  put(key, &op.schema());
  for (const auto& a : args) put_value(key, a);

  // Per thread, so a hit takes no lock; a thread works out each signature once.
  thread_local std::unordered_map<std::string, std::shared_ptr<const MetaResult>> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string miss = key;  // the meta run may launch nested lookups that reuse `key`
  auto result = run_on_meta(op, args);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(std::move(miss), result);
  return result;
}

}  // namespace openreg::eager
