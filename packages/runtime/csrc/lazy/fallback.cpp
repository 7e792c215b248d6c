// Registers the PrivateUse1 fallback and starts openreg's layers for the first
// op that reaches it before they started (openreg/lazy/fallback.h says when).
#include "openreg/lazy/fallback.h"

#include <Python.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/library.h>

#include <atomic>
#include <memory>

#include "openreg/lazy/entry.h"

namespace openreg::lazy {
namespace {

constexpr auto kKey = c10::DispatchKey::PrivateUse1;

std::atomic<FallbackFn> g_policy{nullptr};
std::atomic<bool> g_started{false};

void start() {
  if (Py_IsInitialized()) {
    torch::utils::device_lazy_init(c10::DeviceType::PrivateUse1);  // raises the layers' LoadError
  } else {
    glue();  // a C++ program: the glue is the device
  }
  g_started.store(true, std::memory_order_release);
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  if (!g_started.load(std::memory_order_acquire)) {
    start();
    return op.redispatchBoxed(keys, stack);  // to the kernel the layers registered, or back here
  }
  FallbackFn policy = g_policy.load(std::memory_order_acquire);
  TORCH_INTERNAL_ASSERT(policy != nullptr, "openreg's glue loaded but did not attach its fallback");
  policy(op, stack);
}

// Unless another PrivateUse1 backend holds the key (torch then refuses our
// hooks too, and the Python layer says why). An exception here would escape
// from `import torch`, which must survive openreg.
const std::unique_ptr<torch::Library> g_library = []() -> std::unique_ptr<torch::Library> {
  if (!registered() || c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kKey)) return nullptr;
  try {
    auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", kKey, __FILE__, __LINE__);
    library->fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
    return library;
  } catch (const std::exception&) {
    return nullptr;
  }
}();

}  // namespace

void attach_fallback(FallbackFn fn) { g_policy.store(fn, std::memory_order_release); }

void mark_started() { g_started.store(true, std::memory_order_release); }

}  // namespace openreg::lazy
