#pragma once
#include <pybind11/pybind11.h>

namespace openreg::python {

// Adds record_memory_history and memory_snapshot to openreg_runtime._C.
void bind_memory_history(pybind11::module& m);

}  // namespace openreg::python
