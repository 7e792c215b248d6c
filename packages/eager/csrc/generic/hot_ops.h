#pragma once
// Typed entry points into the generic kernel for the ops a training step
// issues most. The dispatcher boxes arguments for a boxed kernel by copying
// each tensor, and copying a tensor that only Python holds takes the GIL
// (PyTorch keeps the Python object alive while C++ holds a second
// reference): twice per tensor per op. A typed kernel receives references,
// so it lends the generic kernel borrowed IValues instead. openreg's own
// kernels that wrap one of those ops do the same (kernels/normalization.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernel.h"
#include "op_info.h"

namespace openreg::eager {

// Registers typed PrivateUse1 kernels for the hottest ATen ops; they run the
// generic kernel without boxing their arguments.
void register_hot_ops(torch::Library& lib);

namespace hot_detail {

template <class T>
c10::IValue lend(const T& v) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, at::Tensor>) {
    return c10::IValue(c10::MaybeOwnedTraits<at::Tensor>::createBorrow(v));
  } else if constexpr (std::is_same_v<U, std::optional<at::Tensor>>) {
    return v.has_value() ? lend(*v) : c10::IValue();
  } else {
    return c10::IValue(v);
  }
}

// Borrowed tensors go back without a reference count change; the rest (lists
// and other values the IValues own) are destroyed normally.
template <size_t N>
struct Lent {
  std::array<c10::IValue, N> values;  // built in place: a copy would take a reference
  ~Lent() {
    for (auto& v : values) {
      if (v.isTensor()) c10::MaybeOwnedTraits<c10::IValue>::destroyBorrow(v);
    }
  }
};

template <class T>
struct IsTensorRefs : std::false_type {};
template <class... T>
struct IsTensorRefs<std::tuple<T...>> : std::bool_constant<(std::is_same_v<T, at::Tensor&> && ...)> {};

template <class Op, class Sig = typename Op::schema>
struct Hot;

template <class Op, class R, class... A>
struct Hot<Op, R(A...)> {
  static const c10::OperatorHandle& op() {
    static const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return handle;
  }

  static R call(A... a) {
    Lent<sizeof...(A)> args{{lend(a)...}};
    Results results = run_op(op(), args.values);
    if constexpr (std::is_same_v<R, void>) {
      return;
    } else if constexpr (std::is_same_v<R, at::Tensor&>) {
      std::array<at::Tensor*, sizeof...(A)> refs{tensor_ref(a)...};
      return *refs.at(op_info(op()).result_alias.at(0));
    } else if constexpr (IsTensorRefs<R>::value) {  // an out= op's several results: its out= arguments
      std::array<at::Tensor*, sizeof...(A)> refs{tensor_ref(a)...};
      return to_refs<R>(refs, std::make_index_sequence<std::tuple_size_v<R>>());
    } else if constexpr (std::is_same_v<R, at::Tensor>) {
      return std::move(results[0]).toTensor();
    } else if constexpr (std::is_same_v<R, std::vector<at::Tensor>>) {
      return std::move(results[0]).toTensorVector();
    } else {
      return to_tuple<R>(results, std::make_index_sequence<std::tuple_size_v<R>>());
    }
  }

  template <class T>
  static at::Tensor* tensor_ref(T&& v) {
    if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor> && !std::is_const_v<std::remove_reference_t<T>>) {
      return &v;
    } else {
      return nullptr;
    }
  }

  template <class Tuple, size_t... I>
  static Tuple to_tuple(Results& results, std::index_sequence<I...>) {
    return Tuple(std::move(results[I]).toTensor()...);
  }

  template <class Tuple, size_t... I>
  static Tuple to_refs(const std::array<at::Tensor*, sizeof...(A)>& refs, std::index_sequence<I...>) {
    const auto& alias = op_info(op()).result_alias;
    return Tuple(*refs.at(alias.at(I))...);
  }
};

}  // namespace hot_detail

// Runs `Op` (an at::_ops:: struct) through the generic kernel, lending it the
// arguments: what a typed kernel of openreg's own calls for the CPU kernel's work.
template <class Op, class... A>
decltype(auto) run_hot(A&&... a) {
  return hot_detail::Hot<Op>::call(std::forward<A>(a)...);
}

}  // namespace openreg::eager
