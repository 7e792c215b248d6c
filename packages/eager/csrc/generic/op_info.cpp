#include "op_info.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda_lacks.h"
#include "cuda_refuses.h"
#include "device_checks.h"
#include "op_policy.h"

namespace openreg::eager {
namespace {

bool is_tensor_like(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  if (auto opt = t->cast<c10::OptionalType>()) return is_tensor_like(opt->getElementType());
  if (auto list = t->cast<c10::ListType>()) return is_tensor_like(list->getElementType());
  return false;
}

int aliased_argument(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  if (ret.alias_info() == nullptr) return -1;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* a = args[i].alias_info();
    if (a != nullptr && a->beforeSets() == ret.alias_info()->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

// The out= overload of `op`: same name, the functional arguments in order,
// then one out tensor per result.
std::optional<c10::OperatorHandle> find_out_variant(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const auto& rets = schema.returns();
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name != schema.name() || name.overload_name == schema.overload_name()) continue;
    auto candidate = c10::Dispatcher::singleton().findSchema(name);
    if (!candidate) continue;
    const auto& cargs = candidate->schema().arguments();
    if (cargs.size() != args.size() + rets.size()) continue;
    bool match = true;
    for (size_t i = 0; i < args.size() && match; ++i) {
      match = cargs[i].name() == args[i].name() && *cargs[i].type() == *args[i].type();
    }
    for (size_t i = args.size(); i < cargs.size() && match; ++i) {
      match = cargs[i].is_out() && cargs[i].type()->kind() == c10::TypeKind::TensorType;
    }
    if (match && candidate->hasComputedKernelForDispatchKey(c10::DispatchKey::CPU)) return candidate;
  }
  return std::nullopt;
}

OpInfo analyse(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  OpInfo info;
  bool mutates = false;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto& a = schema.arguments()[i];
    if (a.alias_info() && a.alias_info()->isWrite()) {
      mutates = true;
      info.written.push_back(static_cast<int>(i));
    }
    auto kind = a.type()->kind();
    if (auto opt = a.type()->cast<c10::OptionalType>()) kind = opt->getElementType()->kind();
    if (kind == c10::TypeKind::GeneratorType) info.generator_arg = static_cast<int>(i);
    if (kind == c10::TypeKind::DeviceObjType) info.device_arg = static_cast<int>(i);
    if (kind == c10::TypeKind::BoolType && a.name() == "pin_memory") info.pin_memory_arg = static_cast<int>(i);
  }
  bool aliases_input = false;
  for (const auto& r : schema.returns()) {
    if (!is_tensor_like(r.type())) info.host_result = true;
    int alias = aliased_argument(schema, r);
    info.result_alias.push_back(alias);
    if (alias >= 0 && !(r.alias_info()->isWrite())) aliases_input = true;
  }
  info.view = aliases_input && !mutates;
  info.foreach = schema.name().rfind("aten::_foreach_", 0) == 0;
  if (has_policy(schema.operator_name(), Policy::kHostResults) ||
      has_policy(schema.operator_name(), Policy::kChecksValues)) {
    info.host_result = true;
  }
  if (has_policy(schema.operator_name(), Policy::kHostUnlessTraining)) {
    info.host_unless_training = schema.argumentIndexWithName("training").value_or(-1);
  }
  info.host_unlike_cuda = has_policy(schema.operator_name(), Policy::kHostResults) ||
                          has_policy(schema.operator_name(), Policy::kHostUnlessTraining);
  // Only structured ops' out= kernels are guaranteed to agree with their meta
  // kernels and functional forms; hand-written ones may resize their outputs or
  // fill them differently (batch_norm, mse_loss, lstsq).
  const bool structured = op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  if (structured && !mutates && !info.view && !info.host_result && !schema.returns().empty()) {
    info.out_variant = find_out_variant(op);
  }
  info.has_cpu_kernel = op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU);
  info.cpu_indices_ok = has_policy(schema.operator_name(), Policy::kCpuIndices);
  info.range_from_values = has_policy(schema.operator_name(), Policy::kRangeFromValues);
  info.takes_zero_tensors = op.hasKernelForDispatchKey(c10::DispatchKey::ZeroTensor);
  info.cuda_refused = cuda_refusal(schema.operator_name());
  info.cuda_lacks_kernel = cuda_lacks_kernel(schema.operator_name());
  // A strided nested tensor's sizes, strides and offsets are CPU tensors on
  // every device (_nested_view_from_buffer takes them).
  const bool nested_metadata = schema.argumentIndexWithName("nested_size").has_value();
  const bool fused_optimizer = has_policy(schema.operator_name(), Policy::kFusedOptimizer);
  const bool no_cpu_scalar = has_policy(schema.operator_name(), Policy::kNoCpuScalar);
  for (const auto& a : schema.arguments()) {
    const bool written = a.alias_info() && a.alias_info()->isWrite();
    // So is an argument named `cpu_...` (_nested_from_padded's example).
    const bool any_cpu =
        (info.cpu_indices_ok && a.name() == "indices") || (fused_optimizer && a.name() == "lr") ||
        a.name().rfind("cpu_", 0) == 0 ||
        (nested_metadata && (a.name() == "nested_size" || a.name() == "nested_strides" || a.name() == "offsets"));
    // CUDA's fused optimizer refuses a CPU grad_scale or found_inf ("grad_scale
    // must be on the same GPU device as the params") or, given a host lr,
    // reads host memory from the device.
    const bool none = written || (no_cpu_scalar && (a.name() == "index" || a.name() == "atol" || a.name() == "rtol")) ||
                      (fused_optimizer && (a.name() == "grad_scale" || a.name() == "found_inf"));
    info.cpu_args.push_back(none ? OpInfo::CpuArg::kNone : any_cpu ? OpInfo::CpuArg::kAny : OpInfo::CpuArg::kScalar);
  }
  const auto& name = schema.operator_name();
  const std::string qualified = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  const auto iterators = tensor_iterator_ops();
  info.one_cpu_scalar = std::binary_search(iterators.begin(), iterators.end(), qualified);
  const auto checked = device_checked_ops();
  if (std::binary_search(checked.begin(), checked.end(), qualified)) {
    // In the order of CUDA's wrapper: out= arguments, then positional ones.
    for (int out_pass = 1; out_pass >= 0; --out_pass) {
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const auto& a = schema.arguments()[i];
        if (!is_tensor_like(a.type()) || info.cpu_args[i] == OpInfo::CpuArg::kAny) continue;
        if (out_pass ? a.is_out() : !a.kwarg_only()) info.device_checked.push_back(static_cast<int>(i));
      }
    }
  }
  return info;
}

}  // namespace

const OpInfo& op_info(const c10::OperatorHandle& op) {
  // Analysed once per process; each thread keeps its own index so that the
  // per-launch lookup takes no lock.
  thread_local std::unordered_map<const c10::FunctionSchema*, const OpInfo*> local;
  auto hit = local.find(&op.schema());
  if (hit != local.end()) return *hit->second;
  static std::mutex mu;
  static std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> infos;
  std::lock_guard<std::mutex> lock(mu);
  auto it = infos.find(&op.schema());
  if (it == infos.end()) it = infos.emplace(&op.schema(), std::make_unique<OpInfo>(analyse(op))).first;
  local.emplace(&op.schema(), it->second.get());
  return *it->second;
}

}  // namespace openreg::eager
