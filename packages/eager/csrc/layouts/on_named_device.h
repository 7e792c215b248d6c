#pragma once
// ATen's factories of sparse and quantized tensors make them on the current
// device, whatever index their Device? argument (or the tensor they are made
// like) names: CUDA's generated wrappers switch to that device first, and so
// does this wrapper of such a kernel that openreg registers itself.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include <optional>
#include <type_traits>
#include <utility>

namespace openreg::eager {

template <auto kernel>
struct OnNamedDevice;

template <typename R, typename... A, R (*kernel)(A...)>
struct OnNamedDevice<kernel> {
  static R call(A... args) {
    std::optional<c10::Device> named, like;
    const auto see = [&named, &like](const auto& a) {
      using T = std::decay_t<decltype(a)>;
      if constexpr (std::is_same_v<T, std::optional<c10::Device>>) {
        if (a && a->type() == c10::DeviceType::PrivateUse1 && a->has_index()) named = a;
      } else if constexpr (std::is_same_v<T, at::Tensor>) {
        if (!like && a.defined() && a.device().type() == c10::DeviceType::PrivateUse1) like = a.device();
      }
    };
    (see(args), ...);
    c10::OptionalDeviceGuard guard(named ? named : like);
    return kernel(std::forward<A>(args)...);
  }
};

}  // namespace openreg::eager
