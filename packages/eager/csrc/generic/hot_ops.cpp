// The typed kernels of the ops a training step issues most (hot_ops.h says why).
#include "hot_ops.h"

#include <ATen/core/IListRef.h>
#include <ATen/ops/_foreach_mul_ops.h>
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
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/where_ops.h>
#include <torch/library.h>

#include <string>
#include <string_view>

#include "op_policy.h"

namespace openreg::eager {
namespace {

template <class Op>
void register_one(torch::Library& lib) {
  TORCH_INTERNAL_ASSERT(has_policy(c10::OperatorName(Op::name, Op::overload_name), Policy::kHot), Op::name, ".",
                        Op::overload_name, " has a typed kernel but no kHot row in op_policy.cpp");
  std::string name = std::string(Op::name).substr(std::string_view("aten::").size());
  if (Op::overload_name[0] != '\0') name += std::string(".") + Op::overload_name;
  lib.impl(name.c_str(), &hot_detail::Hot<Op>::call);
}

template <class... Ops>
void register_all(torch::Library& lib) {
  (register_one<Ops>(lib), ...);
}

}  // namespace

void register_hot_ops(torch::Library& lib) {
  // (add and sub: kernels/add_sub_scalars.cpp; foreach add and sub: kernels/foreach_add_sub.cpp)
  register_all<at::_ops::mul_Tensor, at::_ops::mul__Tensor, at::_ops::mul_Scalar, at::_ops::div_Tensor,
               at::_ops::div__Tensor, at::_ops::div_Scalar, at::_ops::relu, at::_ops::relu_,
               at::_ops::threshold_backward, at::_ops::sigmoid, at::_ops::sigmoid_backward, at::_ops::tanh,
               at::_ops::tanh_backward, at::_ops::gelu, at::_ops::gelu_backward, at::_ops::where_self, at::_ops::mm,
               at::_ops::addmm, at::_ops::bmm, at::_ops::sum_dim_IntList, at::_ops::mean_dim,
               at::_ops::nll_loss_forward, at::_ops::nll_loss_backward, at::_ops::addcmul_, at::_ops::addcdiv_,
               at::_ops::lerp__Scalar, at::_ops::_foreach_mul__Scalar,
               // what a Python loop or condition on device values issues before each read
               at::_ops::eq_Scalar, at::_ops::ne_Scalar, at::_ops::ge_Scalar, at::_ops::gt_Scalar, at::_ops::le_Scalar,
               at::_ops::lt_Scalar, at::_ops::eq_Tensor, at::_ops::ne_Tensor, at::_ops::ge_Tensor, at::_ops::gt_Tensor,
               at::_ops::le_Tensor, at::_ops::lt_Tensor, at::_ops::all, at::_ops::any,
               // what torch.compile's wrappers call for matmuls
               at::_ops::mm_out, at::_ops::addmm_out, at::_ops::bmm_out>(lib);
}

}  // namespace openreg::eager
