// openreg_eager._C: loading it installs the generic kernel; these functions
// expose the per-op policy table and orccl.
#include <torch/csrc/utils/pybind.h>

#include "../distributed/python.h"
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
  m.def("op_policies", &op_policies, "(op, policy, reason) for every op openreg treats otherwise than by its schema.");
  openreg::eager::distributed::bind(m);
}
