// What the PrivateUse1 boxed fallback (libopenreg_lazy registers it) runs once
// openreg started. With the runtime alone, only what printing needs runs
// (through the CPU): inspection ops, and ops on boolean masks or 0-dim
// tensors. Everything else says where compute comes from. openreg-eager
// replaces the handler with its own policy.
#include "openreg/glue/fallback.h"

#include <ATen/native/CPUFallback.h>

#include <atomic>
#include <string>
#include <string_view>
#include <unordered_set>

namespace openreg::glue {
namespace {

std::atomic<FallbackFn> g_handler{nullptr};

// Printing a tensor (torch._tensor_str) inspects it with these ops (cat and
// stack summarise large ones), combines
// boolean masks and does arithmetic on 0-dim results. Matched by name, any
// overload (.out included).
bool is_inspection_op(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  static const std::unordered_set<std::string_view> names = {"aten::abs",
                                                             "aten::isfinite",
                                                             "aten::isnan",
                                                             "aten::isinf",
                                                             "aten::ne",
                                                             "aten::eq",
                                                             "aten::gt",
                                                             "aten::lt",
                                                             "aten::ge",
                                                             "aten::le",
                                                             "aten::masked_select",
                                                             "aten::bitwise_and",
                                                             "aten::logical_and",
                                                             "aten::max",
                                                             "aten::min",
                                                             "aten::ceil",
                                                             "aten::floor",
                                                             "aten::any",
                                                             "aten::all",
                                                             "aten::equal",
                                                             "aten::cat",
                                                             "aten::stack"};
  if (names.count(op.schema().name()) > 0) return true;
  const auto n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    if (!stack[i].isTensor()) continue;
    const at::Tensor& t = stack[i].toTensor();
    if (t.dim() > 0 && t.scalar_type() != at::kBool) return false;
  }
  return true;
}

void runtime_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (FallbackFn handler = g_handler.load()) return handler(op, stack);
  if (is_inspection_op(op, *stack)) return at::native::cpu_fallback(op, stack);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "'", op.schema().operator_name(),
                              "' has no openreg kernel: openreg-runtime provides the device, tensors and copies, and "
                              "compute ops come with openreg-eager. Install it with: pip install openreg");
}

// Before this library's other registrations (default priority): attaching
// drops libopenreg_lazy's factory kernels, which tensors.cpp's would override.
[[gnu::constructor(101)]] void attach() { lazy::attach_fallback(&runtime_fallback); }

}  // namespace

void set_fallback_handler(FallbackFn fn) {
  g_handler.store(fn);
  lazy::mark_started();
}

}  // namespace openreg::glue
