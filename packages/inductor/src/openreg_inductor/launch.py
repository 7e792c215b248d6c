"""Loads generated C++ kernels so that calling them queues them on the current openreg stream.

Inductor's CPU kernels reach Python through `async_compile.cpp_pybinding`, which wraps each kernel in a
small extension module. openreg's variant wraps it differently: the call hands the kernel and its
arguments to the runtime's C ABI (`openreg_launch_host_fn`, found by name in the process), so the
kernel runs on the stream's worker, in order with eager ops, with strict mode opening its pointers.
"""

from __future__ import annotations

from torch._inductor import config as inductor_config
from torch._inductor.async_compile import AsyncCompile, get_compile_threads
from torch._inductor.codecache import CppPythonBindingsCodeCache, LambdaFuture

from . import config

# C++ shared by the Python bindings and the C++ wrappers: `launch(name, flags, kernel, args...)` and a
# device guard, calling the runtime's C ABI (openreg/core/c_api.h), which they find by name.
LAUNCH_CPP = r"""
#include <dlfcn.h>
#include <cstddef>
#include <stdexcept>
#include <tuple>
#include <type_traits>

namespace openreg_inductor {
using LaunchFn = int (*)(const char*, void (*)(void*), void*, void (*)(void*), const void* const*, std::size_t, int,
                         char*, std::size_t);

inline LaunchFn launcher() {
  static const auto fn = reinterpret_cast<LaunchFn>(dlsym(RTLD_DEFAULT, "openreg_launch_host_fn"));
  if (!fn) throw std::runtime_error("openreg's runtime is not loaded in this process: import openreg first");
  return fn;
}

template <class T>
const void* pointer(T value) {
  if constexpr (std::is_pointer_v<T>) return value; else return nullptr;
}

// A host scalar passed to a queued kernel by value: the kernel sees a pointer to the copy.
template <class T>
struct HostValue {
  explicit HostValue(T* pointer) : value(*pointer) {}
  std::remove_const_t<T> value;
  operator T*() { return &value; }
};

// Queues kernel(args...) on the current openreg stream; flags: 1 waits for it.
template <class K, class... A>
void launch(const char* name, int flags, K kernel, A... args) {
  using Call = std::tuple<K, A...>;
  const void* touched[sizeof...(A) + 1] = {pointer(args)...};
  char err[1024] = "";
  int rc = launcher()(name, [](void* c) { std::apply([](K k, A&... a) { k(a...); }, *static_cast<Call*>(c)); },
                      new Call(kernel, args...), [](void* c) { delete static_cast<Call*>(c); }, touched,
                      sizeof...(A), flags, err, sizeof err);
  if (rc != 0) throw std::runtime_error(err);
}

// The C++ wrappers' device guard (their graphs on openreg:1 run there).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) : previous_(exchange(index)) {}
  DeviceGuard(void* /* AOTInductor's stream */, int index) : DeviceGuard(index) {}
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { exchange(previous_); }
  void set_index(int index) { exchange(index); }
  // `index`, or the current device if it is negative.
  static int current(int index) { return index >= 0 ? index : exchange(-1); }

 private:
  static int exchange(int index) {
    static const auto fn = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "openreg_exchange_device"));
    if (!fn) throw std::runtime_error("openreg's runtime is not loaded in this process: import openreg first");
    return fn(index);
  }
  int previous_;
};
}  // namespace openreg_inductor
"""


def simd(simdlen: int | None):
    """Inductor's C++ vector width set to `simdlen` (None: the host's widest), for codegen or a build."""
    return inductor_config.patch({"cpp.simdlen": simdlen})


def launch_flags() -> int:
    return 0 if config.async_launch else 1  # 1: wait for the kernel (see LAUNCH_CPP)


class OpenRegBindingsCodeCache(CppPythonBindingsCodeCache):
    """CppPythonBindingsCodeCache whose modules queue the kernel instead of calling it."""

    # The cache itself is CppPythonBindingsCodeCache's (keyed by the source, which differs), so that
    # Inductor's fresh_cache() clears it.
    extra_parse_arg = LAUNCH_CPP.replace("{", "{{").replace("}", "}}")  # it goes through str.format
    call_entry_function = "openreg_inductor::launch(\"compiled kernel\", {flags}, kernel, {{}}); Py_RETURN_NONE;"

    @classmethod
    def bindings(cls, flags: int) -> type[OpenRegBindingsCodeCache]:
        """The variant for `flags` (they are compiled in, so each gets its own cache key)."""
        entry = cls.call_entry_function.format(flags=flags)
        return type(f"{cls.__name__}{flags}", (cls,), {"call_entry_function": entry})


_BINDINGS = {flags: OpenRegBindingsCodeCache.bindings(flags) for flags in (0, 1)}


def loader(flags: int, simdlen: int | None) -> str:
    """The call that generated wrapper code makes, in place of `async_compile.cpp_pybinding(`, to load an
    openreg kernel built with these settings (baked into the wrapper, so cached graphs keep them)."""
    return f"openreg_cpp_pybinding(async_compile, {flags}, {simdlen!r}, "


def cpp_pybinding(async_compile: AsyncCompile, flags: int, simdlen: int | None, argtypes: list[str],
                  source_code: str):
    """`async_compile.cpp_pybinding` for openreg kernels."""
    bindings = _BINDINGS[flags]
    with simd(simdlen):  # the build flags follow the generated code
        if get_compile_threads() <= 1:
            return bindings.load_pybinding(argtypes, source_code)
        return LambdaFuture(bindings.load_pybinding_async(argtypes, source_code, submit_fn=async_compile.submit))
