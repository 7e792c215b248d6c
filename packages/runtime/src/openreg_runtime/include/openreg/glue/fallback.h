#pragma once
// The PrivateUse1 boxed fallback is owned by the runtime. Without a handler it
// tells the user that compute ops need openreg-eager; openreg-eager installs
// its generic kernel here.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace openreg::glue {

using FallbackFn = void (*)(const c10::OperatorHandle&, torch::jit::Stack*);
void set_fallback_handler(FallbackFn fn);

}  // namespace openreg::glue
