// CUDA's foreach add and sub read alpha and their scalars in float for a
// float16 or bfloat16 list, as its add and sub do (add_sub_scalars.cpp); the
// CPU's foreach kernels run the CPU's add per tensor, which rounds them to the
// list's dtype first (foreach SGD's _foreach_add_(params, grads, alpha=-lr)
// stepped bfloat16 parameters by lr rounded to bfloat16). openreg runs such a
// call as openreg's add or sub per tensor, or, in place on lists of one such
// dtype and device (an optimizer's step), as one kernel that computes each
// tensor in float32; every other call is the CPU's foreach kernel, as a hot
// op's.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_sub_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "../generic/hot_ops.h"
#include "openreg/glue/launch.h"

namespace openreg::eager {
namespace {

using at::Tensor;
using at::TensorList;

// A foreach add or sub (`kSub`), through its ATen ops' forms and, per tensor, openreg's add or sub.
template <bool kSub, class L, class LInPlace, class S, class SInPlace, class SL, class SLInPlace>
struct Foreach {
  static constexpr const char* kName = kSub ? "aten::_foreach_sub_" : "aten::_foreach_add_";
  using List = L;
  using List_ = LInPlace;
  using Scalar = S;
  using Scalar_ = SInPlace;
  using Scalars = SL;
  using Scalars_ = SLInPlace;
  static Tensor one(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
    return kSub ? at::sub(a, b, alpha) : at::add(a, b, alpha);
  }
  static void one_(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
    kSub ? a.sub_(b, alpha) : a.add_(b, alpha);
  }
  static Tensor one(const Tensor& a, const at::Scalar& s) { return kSub ? at::sub(a, s) : at::add(a, s); }
  static void one_(const Tensor& a, const at::Scalar& s) { kSub ? a.sub_(s) : a.add_(s); }
};

using Add =
    Foreach<false, at::_ops::_foreach_add_List, at::_ops::_foreach_add__List, at::_ops::_foreach_add_Scalar,
            at::_ops::_foreach_add__Scalar, at::_ops::_foreach_add_ScalarList, at::_ops::_foreach_add__ScalarList>;
using Sub =
    Foreach<true, at::_ops::_foreach_sub_List, at::_ops::_foreach_sub__List, at::_ops::_foreach_sub_Scalar,
            at::_ops::_foreach_sub__Scalar, at::_ops::_foreach_sub_ScalarList, at::_ops::_foreach_sub__ScalarList>;

bool any_half_precision(TensorList tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; });
}

bool reads_alpha_wide(TensorList self, const at::Scalar& alpha) {
  return !alpha.isBoolean() && !alpha.isComplex() && !alpha.equal(1) && any_half_precision(self);
}

// Whether one kernel can serve an in-place call as the CPU's per-tensor ops would: every tensor of `self`'s first
// one's dtype and device, each of `others` (a list of tensors or of nothing) of its `self` tensor's shape and
// not partly overlapping it, no tensor of `self` writing one element twice, and every scalar a real number. Any
// other call runs openreg's op per tensor, whose checks raise the CPU's error at the call: the kernel's own
// would raise at a later sync, or drop a complex scalar's imaginary part.
bool in_one_kernel(TensorList self, TensorList others, at::ArrayRef<at::Scalar> scalars = {}) {
  const Tensor& first = self.front();
  auto like = [&first](const Tensor& t, const Tensor& shaped) {
    return t.scalar_type() == first.scalar_type() && t.device() == first.device() && t.sizes() == shaped.sizes();
  };
  for (size_t i = 0; i < self.size(); ++i) {
    if (!like(self[i], self[i]) || at::has_internal_overlap(self[i]) == at::MemOverlap::Yes) return false;
    if (!others.empty() &&
        (!like(others[i], self[i]) || at::get_overlap_status(self[i], others[i]) == at::MemOverlapStatus::Partial)) {
      return false;
    }
  }
  return std::none_of(scalars.begin(), scalars.end(),
                      [](const at::Scalar& s) { return s.isBoolean() || s.isComplex(); });
}

// Queues one kernel that runs `each(self[i], others[i] or an undefined tensor, i)` on host tensors over them.
template <class Each>
void launch_each(const char* name, TensorList self, TensorList others, Each each) {
  std::vector<glue::HostView> views;
  glue::Touches touches;
  for (TensorList list : {self, others}) {
    for (const Tensor& t : list) {
      views.push_back(glue::HostView::of(t));
      touches.push_back(views.back().data());
    }
  }
  glue::launch(self.front().device().index(), name, std::move(touches),
               [views = std::move(views), n = self.size(), with_others = !others.empty(), each] {
                 for (size_t i = 0; i < n; ++i)
                   each(views[i].tensor(), with_others ? views[n + i].tensor() : Tensor(), i);
               });
}

template <class Op>
std::vector<Tensor> list(TensorList self, TensorList other, const at::Scalar& alpha) {
  if (!reads_alpha_wide(self, alpha)) return run_hot<typename Op::List>(self, other, alpha);
  at::native::check_foreach_api_restrictions(self, other);
  std::vector<Tensor> out;
  for (size_t i = 0; i < self.size(); ++i) out.push_back(Op::one(self[i], other[i], alpha));
  return out;
}

template <class Op>
void list_(TensorList self, TensorList other, const at::Scalar& alpha) {
  if (!reads_alpha_wide(self, alpha)) return run_hot<typename Op::List_>(self, other, alpha);
  at::native::check_foreach_api_restrictions(self, other);
  if (!in_one_kernel(self, other)) {
    for (size_t i = 0; i < self.size(); ++i) Op::one_(self[i], other[i], alpha);
    return;
  }
  launch_each(Op::kName, self, other, [alpha](const Tensor& s, const Tensor& o, size_t) {
    s.copy_(Op::one(s.to(at::kFloat), o.to(at::kFloat), alpha));
  });
}

template <class Op>
std::vector<Tensor> scalar(TensorList self, const at::Scalar& s) {
  if (!any_half_precision(self)) return run_hot<typename Op::Scalar>(self, s);
  std::vector<Tensor> out;
  for (const Tensor& t : self) out.push_back(Op::one(t, s));
  return out;
}

template <class Op>
void scalar_(TensorList self, const at::Scalar& s) {
  if (!any_half_precision(self)) return run_hot<typename Op::Scalar_>(self, s);
  if (!in_one_kernel(self, {}, s)) {
    for (const Tensor& t : self) Op::one_(t, s);
    return;
  }
  launch_each(Op::kName, self, {},
              [s](const Tensor& t, const Tensor&, size_t) { t.copy_(Op::one(t.to(at::kFloat), s)); });
}

template <class Op>
std::vector<Tensor> scalars(TensorList self, at::ArrayRef<at::Scalar> s) {
  if (!any_half_precision(self)) return run_hot<typename Op::Scalars>(self, s);
  at::native::check_foreach_api_restrictions(self, s);
  std::vector<Tensor> out;
  for (size_t i = 0; i < self.size(); ++i) out.push_back(Op::one(self[i], s[i]));
  return out;
}

template <class Op>
void scalars_(TensorList self, at::ArrayRef<at::Scalar> s) {
  if (!any_half_precision(self)) return run_hot<typename Op::Scalars_>(self, s);
  at::native::check_foreach_api_restrictions(self, s);
  if (!in_one_kernel(self, {}, s)) {
    for (size_t i = 0; i < self.size(); ++i) Op::one_(self[i], s[i]);
    return;
  }
  launch_each(Op::kName, self, {}, [scalars = s.vec()](const Tensor& t, const Tensor&, size_t i) {
    t.copy_(Op::one(t.to(at::kFloat), scalars[i]));
  });
}

template <class Op>
void register_forms(torch::Library& m, const char* name) {
  const std::string n = name;
  m.impl((n + ".List").c_str(), TORCH_FN(list<Op>));
  m.impl((n + "_.List").c_str(), TORCH_FN(list_<Op>));
  m.impl((n + ".Scalar").c_str(), TORCH_FN(scalar<Op>));
  m.impl((n + "_.Scalar").c_str(), TORCH_FN(scalar_<Op>));
  m.impl((n + ".ScalarList").c_str(), TORCH_FN(scalars<Op>));
  m.impl((n + "_.ScalarList").c_str(), TORCH_FN(scalars_<Op>));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_forms<Add>(m, "_foreach_add");
  register_forms<Sub>(m, "_foreach_sub");
}

}  // namespace openreg::eager
