#pragma once
#include <pybind11/pybind11.h>

namespace openreg::eager::distributed {

// Adds the `distributed` submodule to openreg_eager._C.
void bind(pybind11::module& m);

}  // namespace openreg::eager::distributed
