// openreg_eager._C.distributed: makes an orccl backend over a gloo one (the
// Python side creates gloo, with the store and timeout c10d gives it).
#include "python.h"

#include <torch/csrc/utils/pybind.h>

#include "backend.h"

namespace openreg::eager::distributed {

void bind(pybind11::module& m) {
  auto d = m.def_submodule("distributed", "orccl, openreg's c10d backend over gloo");
  d.def(
      "orccl",
      [](c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<Orccl>(std::move(gloo), rank, size);
      },
      pybind11::arg("gloo"), pybind11::arg("rank"), pybind11::arg("size"));
}

}  // namespace openreg::eager::distributed
