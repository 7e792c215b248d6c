// openreg_eager._C: loading it installs the generic kernel; these functions
// expose the CPU-fallback policy and counts.
#include <torch/extension.h>

#include "../fallback/policy.h"

PYBIND11_MODULE(_C, m) {
  m.def("fallback_counts", &openreg::eager::fallback_counts,
        "How many times each op ran through the CPU fallback in this process.");
  m.def("reset_fallback_counts", &openreg::eager::reset_fallback_counts);
  m.def("fallback_policy", &openreg::eager::fallback_policy);
}
