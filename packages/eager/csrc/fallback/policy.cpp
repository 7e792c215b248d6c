#include "policy.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <mutex>

namespace openreg::eager {
namespace {

std::mutex g_mu;
std::map<std::string, int64_t> g_counts;

}  // namespace

std::string fallback_policy() {
  static const std::string policy = [] {
    const char* raw = std::getenv("OPENREG_FALLBACK");
    std::string v = raw && *raw ? raw : "warn";
    TORCH_CHECK(v == "warn" || v == "error" || v == "silent", "OPENREG_FALLBACK='", v,
                "' is not a fallback policy: use warn (the default), error or silent");
    return v;
  }();
  return policy;
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason) {
  const auto& name = op.schema().operator_name();
  std::string op_name = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  const std::string policy = fallback_policy();
  TORCH_CHECK_NOT_IMPLEMENTED(policy != "error", "'", op_name, "' would run through the CPU fallback on openreg (",
                              reason,
                              ") and OPENREG_FALLBACK=error forbids it. Unset OPENREG_FALLBACK or set it to "
                              "warn or silent to allow it.");
  bool first;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    first = g_counts[op_name]++ == 0;
  }
  if (first && policy == "warn") {
    TORCH_WARN("'", op_name, "' ran through the CPU fallback on openreg (", reason,
               "): its inputs were copied to the CPU and its results back, which is slow. Set "
               "OPENREG_FALLBACK=silent to hide this warning or OPENREG_FALLBACK=error to make it an error.");
  }
  at::native::cpu_fallback(op, stack);
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts.clear();
}

}  // namespace openreg::eager
