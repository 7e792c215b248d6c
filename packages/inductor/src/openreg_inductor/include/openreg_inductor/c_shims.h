#pragma once
// What openreg's generated C shims (codegen/c_shims.py) share: the C shims take an out= op's arguments in the C++
// API's order, out= tensors first, while the at::_ops dispatcher calls they forward to take them last.
#include <cstddef>
#include <tuple>
#include <utility>

namespace openreg_inductor {

// Calls Op::call with the first K arguments moved to the end.
template <std::size_t K, class Op>
struct OutsLast {
  template <class T, std::size_t... I>
  static decltype(auto) apply(T&& args, std::index_sequence<I...>) {
    return Op::call(std::get<(I + K) % sizeof...(I)>(std::move(args))...);
  }
  template <class... A>
  decltype(auto) operator()(A&&... a) const {
    return apply(std::forward_as_tuple(std::forward<A>(a)...), std::index_sequence_for<A...>());
  }
};

}  // namespace openreg_inductor
