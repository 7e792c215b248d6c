#pragma once
// The CPU fallback — copy the inputs to the CPU, compute there, copy back — is
// the last resort for what the generic kernel cannot serve. OPENREG_FALLBACK
// says what happens when it is used: warn (once per op, the default), error,
// or silent. Every use is counted per op.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <string>

namespace openreg::eager {

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason);
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();
// "warn", "error" or "silent"; a bad OPENREG_FALLBACK raises naming it.
std::string fallback_policy();

}  // namespace openreg::eager
