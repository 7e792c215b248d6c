#include "meta.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

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
    bool wrapped;
    int32_t dim;
  };
  static_assert(std::has_unique_object_representations_v<Head>, "padding bytes would make equal keys differ");
  put(key, Head{'t', t.scalar_type(), impl->device_type(), impl->is_wrapped_number(),
                static_cast<int32_t>(impl->dim())});
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
  auto it = cache.results.find(cache.key.view());
  if (it != cache.results.end()) return it->second;
  std::string miss(cache.key.view());  // the meta run may launch nested lookups that reuse the key
  auto result = run_on_meta(op, args);
  if (cache.results.size() >= kMaxEntries) cache.results.clear();
  cache.results.emplace(std::move(miss), result);
  return result;
}

}  // namespace openreg::eager
