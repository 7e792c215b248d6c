// Registers the PrivateUse1 fallback and starts openreg's layers for the first
// op that reaches it before they started (openreg/lazy/fallback.h says when).
#include "openreg/lazy/fallback.h"

#include <Python.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/library.h>

#include <atomic>
#include <functional>
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

// Until the glue loads no openreg tensor exists, so an op reaches PrivateUse1
// only as a factory whose kernel is per backend (torch's BackendSelect picks
// the device's kernel; composite factories call these). Registering a
// fallback updates every operator's dispatch table (3.5 ms, 40 % of
// openreg's share of `import torch`), so `import torch` registers these
// factories alone and the glue's loading registers the fallback
// (attach_fallback). The test_autoload_entry_points factory test checks the
// list against the running torch.
constexpr const char* kFactories[] = {"empty.memory_format",
                                      "empty_strided",
                                      "_efficientzerotensor",
                                      "tril_indices",
                                      "triu_indices",
                                      "from_file",
                                      "_make_dep_token",
                                      "_cudnn_init_dropout_state",
                                      "empty_quantized",
                                      "_empty_affine_quantized",
                                      "_empty_per_channel_affine_quantized",
                                      "_sparse_coo_tensor_with_dims_and_tensors"};

// Nothing when another PrivateUse1 backend holds the key (torch then refuses
// our hooks too, and the Python layer says why). An exception here would
// escape from `import torch`, which must survive openreg.
std::unique_ptr<torch::Library> library(const char* ns, const std::function<void(torch::Library&)>& add) {
  if (!registered() || c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kKey)) return nullptr;
  try {
    auto library = std::make_unique<torch::Library>(torch::Library::IMPL, ns, kKey, __FILE__, __LINE__);
    add(*library);
    return library;
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::unique_ptr<torch::Library> g_factories = library("aten", [](torch::Library& m) {
  for (const char* name : kFactories) m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fallback>());
});
std::unique_ptr<torch::Library> g_fallback;

}  // namespace

void attach_fallback(FallbackFn fn) {
  g_policy.store(fn, std::memory_order_release);
  if (g_factories == nullptr) return;  // attached already, or another backend holds the key
  // The fallback first: ops reach one of the two throughout.
  g_fallback =
      library("_", [](torch::Library& m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); });
  g_factories.reset();
}

void mark_started() { g_started.store(true, std::memory_order_release); }

void ensure_started() {
  // A layer that makes a tensor while it loads must not start the layers again.
  thread_local bool starting = false;
  if (g_started.load(std::memory_order_acquire) || starting) return;
  starting = true;
  try {
    start();
  } catch (...) {
    starting = false;
    throw;
  }
  starting = false;
}

}  // namespace openreg::lazy
