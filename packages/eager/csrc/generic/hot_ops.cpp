// Typed entry points into the generic kernel for the ops a training step
// issues most. The dispatcher boxes arguments for a boxed kernel by copying
// each tensor, and copying a tensor that only Python holds takes the GIL
// (PyTorch keeps the Python object alive while C++ holds a second
// reference): twice per tensor per op. A typed kernel receives references,
// so it lends the generic kernel borrowed IValues instead.
#include "hot_ops.h"

#include <ATen/core/IListRef.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include <array>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "kernel.h"
#include "op_info.h"
#include "op_policy.h"

namespace openreg::eager {
namespace {

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
    } else if constexpr (std::is_same_v<R, at::Tensor>) {
      return std::move(results[0]).toTensor();
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
};

template <class Op>
void register_one(torch::Library& lib) {
  TORCH_INTERNAL_ASSERT(has_policy(c10::OperatorName(Op::name, Op::overload_name), Policy::kHot), Op::name, ".",
                        Op::overload_name, " has a typed kernel but no kHot row in op_policy.cpp");
  std::string name = std::string(Op::name).substr(std::string_view("aten::").size());
  if (Op::overload_name[0] != '\0') name += std::string(".") + Op::overload_name;
  lib.impl(name.c_str(), &Hot<Op>::call);
}

template <class... Ops>
void register_all(torch::Library& lib) {
  (register_one<Ops>(lib), ...);
}

}  // namespace

void register_hot_ops(torch::Library& lib) {
  register_all<at::_ops::add_Tensor, at::_ops::add__Tensor, at::_ops::sub_Tensor, at::_ops::sub__Tensor,
               at::_ops::mul_Tensor, at::_ops::mul__Tensor, at::_ops::mul_Scalar, at::_ops::div_Tensor,
               at::_ops::div__Tensor, at::_ops::div_Scalar, at::_ops::relu, at::_ops::relu_,
               at::_ops::threshold_backward, at::_ops::sigmoid, at::_ops::sigmoid_backward, at::_ops::tanh,
               at::_ops::tanh_backward, at::_ops::gelu, at::_ops::gelu_backward, at::_ops::where_self, at::_ops::mm,
               at::_ops::addmm, at::_ops::bmm, at::_ops::sum_dim_IntList, at::_ops::mean_dim, at::_ops::_softmax,
               at::_ops::_softmax_backward_data, at::_ops::_log_softmax, at::_ops::_log_softmax_backward_data,
               at::_ops::nll_loss_forward, at::_ops::nll_loss_backward, at::_ops::native_batch_norm,
               at::_ops::native_batch_norm_backward, at::_ops::native_layer_norm, at::_ops::native_layer_norm_backward,
               at::_ops::addcmul_, at::_ops::addcdiv_, at::_ops::lerp__Scalar, at::_ops::_foreach_add__List,
               at::_ops::_foreach_mul__Scalar,
               // what a Python loop or condition on device values issues before each read
               at::_ops::eq_Scalar, at::_ops::ne_Scalar, at::_ops::ge_Scalar, at::_ops::gt_Scalar, at::_ops::le_Scalar,
               at::_ops::lt_Scalar, at::_ops::eq_Tensor, at::_ops::ne_Tensor, at::_ops::ge_Tensor, at::_ops::gt_Tensor,
               at::_ops::le_Tensor, at::_ops::lt_Tensor, at::_ops::all, at::_ops::any,
               // what torch.compile's wrappers call for matmuls
               at::_ops::mm_out, at::_ops::addmm_out, at::_ops::bmm_out>(lib);
}

}  // namespace openreg::eager
