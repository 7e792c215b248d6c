#pragma once
// TorchScript builds the lists it passes (prim::ListConstruct) with an element
// type of its own, equal to but not the same object as the canonical Tensor or
// Tensor?, and IValue's isTensorList and isOptionalTensorList compare those
// objects: a boxed kernel rebuilds such lists as the canonical types first, so
// that openreg, and the CPU kernels, see their device tensors.
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

namespace openreg::eager {

inline void use_canonical_tensor_lists(torch::jit::Stack& stack, size_t n) {
  for (auto it = stack.end() - static_cast<std::ptrdiff_t>(n); it != stack.end(); ++it) {
    if (!it->isList() || it->isTensorList() || it->isOptionalTensorList()) continue;
    const c10::TypePtr element = it->toList().elementType();
    if (element->kind() == c10::TypeKind::TensorType) {
      c10::List<at::Tensor> tensors;
      for (const c10::IValue& e : it->toListRef()) tensors.push_back(e.toTensor());
      *it = std::move(tensors);
    } else if (auto optional = element->cast<c10::OptionalType>();
               optional && optional->getElementType()->kind() == c10::TypeKind::TensorType) {
      c10::List<std::optional<at::Tensor>> tensors;
      for (const c10::IValue& e : it->toListRef()) {
        tensors.push_back(e.isNone() ? std::nullopt : std::optional<at::Tensor>(e.toTensor()));
      }
      *it = std::move(tensors);
    }
  }
}

}  // namespace openreg::eager
