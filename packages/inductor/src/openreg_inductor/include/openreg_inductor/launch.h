#pragma once
// How openreg's generated C++ runs kernels: `launch(name, flags, kernel, args...)` queues a kernel on the current
// openreg stream, and `DeviceGuard` is the C++ wrappers' device guard. Both call the runtime's C ABI, which generated
// code is not linked against: they look its functions up by name, typed by the declarations in c_api.h, so that a
// changed signature fails to compile here instead of being called the old way.
#include <dlfcn.h>
#include <openreg/core/c_api.h>

#include <cstddef>
#include <stdexcept>
#include <tuple>
#include <type_traits>

namespace openreg_inductor {

// The runtime's C function `name`, of type `Fn` (as c_api.h declares it).
template <class Fn>
Fn* runtime_function(const char* name) {
  auto* fn = reinterpret_cast<Fn*>(dlsym(RTLD_DEFAULT, name));
  if (!fn) throw std::runtime_error("openreg's runtime is not loaded in this process: import openreg first");
  return fn;
}

// The device pointer among a kernel's arguments (strict mode opens it for the kernel), or nullptr.
template <class T>
const void* pointer(T value) {
  if constexpr (std::is_pointer_v<T>)
    return value;
  else
    return nullptr;
}

// A host scalar passed to a queued kernel by value: the kernel sees a pointer to the copy.
template <class T>
struct HostValue {
  explicit HostValue(T* pointer) : value(*pointer) {}
  std::remove_const_t<T> value;
  operator T*() { return &value; }
};

// Queues kernel(args...) on the current openreg stream; `flags` as openreg_launch_host_fn takes them
// (OPENREG_LAUNCH_WAIT: returns once the kernel has run).
template <class K, class... A>
void launch(const char* name, int flags, K kernel, A... args) {
  static const auto launch_host_fn = runtime_function<decltype(openreg_launch_host_fn)>("openreg_launch_host_fn");
  using Call = std::tuple<K, A...>;
  const void* touched[sizeof...(A) + 1] = {pointer(args)...};
  char err[1024] = "";
  int rc = launch_host_fn(
      name, [](void* c) { std::apply([](K k, A&... a) { k(a...); }, *static_cast<Call*>(c)); },
      new Call(kernel, args...), [](void* c) { delete static_cast<Call*>(c); }, touched, sizeof...(A), flags, err,
      sizeof err);
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
    static const auto exchange_device = runtime_function<decltype(openreg_exchange_device)>("openreg_exchange_device");
    return exchange_device(index);
  }
  int previous_;
};

}  // namespace openreg_inductor
