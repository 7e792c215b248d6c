// openreg_eager._C: loading it installs the generic kernel; these functions
// expose the CPU-fallback policy and counts, and the per-op policy table.
#include <torch/extension.h>

#include "../distributed/python.h"
#include "../fallback/policy.h"
#include "../generic/op_policy.h"

namespace {

std::vector<std::tuple<std::string, std::string, std::string>> op_policies() {
  std::vector<std::tuple<std::string, std::string, std::string>> rows;
  for (const auto& row : openreg::eager::op_policies()) {
    rows.emplace_back(row.op, openreg::eager::policy_name(row.policy), row.reason);
  }
  return rows;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.def("fallback_counts", &openreg::eager::fallback_counts,
        "How many times each op ran through the CPU fallback in this process.");
  m.def("reset_fallback_counts", &openreg::eager::reset_fallback_counts);
  m.def("fallback_policy", &openreg::eager::fallback_policy);
  m.def("op_policies", &op_policies, "(op, policy, reason) for every op openreg treats otherwise than by its schema.");
  openreg::eager::distributed::bind(m);
}
