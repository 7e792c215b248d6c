#include "per_device.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

namespace openreg::eager {
namespace {

template <class T>
c10::List<T> pick(const c10::List<T>& list, const std::vector<int64_t>& indices) {
  c10::List<T> out = list.copy();
  out.clear();
  for (int64_t i : indices) out.push_back(list.get(i));
  return out;
}

// `value`'s part for `indices`: the lists of the call's length (tensors, scalars) and a tensor of per-index scalars
// (_foreach_addcmul's `scalars`) are cut; the rest is every part's.
c10::IValue part_of(const c10::IValue& value, const c10::Argument& argument, const std::vector<int64_t>& indices,
                    size_t n) {
  if (value.isTensorList() && value.toTensorList().size() == n) return pick(value.toTensorList(), indices);
  if (value.isDoubleList() && value.toDoubleList().size() == n) return pick(value.toDoubleList(), indices);
  if (value.isList() && value.toList().size() == n) return pick(value.toList(), indices);
  if (value.isTensor() && argument.name() == "scalars" && value.toTensor().numel() == static_cast<int64_t>(n))
    return value.toTensor().index_select(0, at::tensor(indices, at::kLong).to(value.toTensor().device()));
  return value;
}

}  // namespace

std::optional<Results> run_per_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  if (args.empty() || !args[0].isTensorList()) return std::nullopt;
  // Read in place: an optimizer's call brings thousands of tensors, and a copy of each costs two atomic operations.
  const c10::ArrayRef<c10::IValue> self = args[0].toListRef();
  if (self.empty()) return std::nullopt;
  const c10::Device first = self[0].toTensor().device();
  if (std::all_of(self.begin(), self.end(), [&](const c10::IValue& t) { return t.toTensor().device() == first; }))
    return std::nullopt;
  std::vector<c10::Device> devices;
  std::vector<std::vector<int64_t>> groups;
  for (size_t i = 0; i < self.size(); ++i) {
    const c10::Device device = self[i].toTensor().device();
    const auto at = std::find(devices.begin(), devices.end(), device) - devices.begin();
    if (at == static_cast<std::ptrdiff_t>(devices.size())) {
      devices.push_back(device);
      groups.emplace_back();
    }
    groups[at].push_back(static_cast<int64_t>(i));
  }
  const auto& arguments = op.schema().arguments();
  std::vector<at::Tensor> merged(self.size());
  bool returns_list = false;
  for (const auto& indices : groups) {
    std::vector<c10::IValue> part;
    for (size_t j = 0; j < args.size(); ++j) part.push_back(part_of(args[j], arguments[j], indices, self.size()));
    Results results = run_op(op, part);
    if (results.empty() || !results[0].isTensorList()) continue;
    returns_list = true;
    const c10::List<at::Tensor> got = results[0].toTensorList();
    for (size_t k = 0; k < indices.size(); ++k) merged[indices[k]] = got.get(k);
  }
  Results out;
  if (returns_list) out.emplace_back(c10::List<at::Tensor>(merged));
  return out;
}

}  // namespace openreg::eager
