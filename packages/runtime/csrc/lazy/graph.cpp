// torch.accelerator.Graph finds openreg's graphs under the device's name from
// `import torch` on; the glue, loaded on first use, implements them.
#include <ATen/core/GraphImplInterface.h>

#include <memory>

#include "openreg/lazy/entry.h"

namespace openreg::lazy {
namespace {

struct Graph final : at::GraphImplInterface {
  explicit Graph(const at::GraphImplArgs& args) : real_(create(args)) {}

  static std::unique_ptr<at::GraphImplInterface> create(const at::GraphImplArgs& args) {
    glue();
    auto real = at::GraphImplRegistry()->Create("OPENREG_GLUE", args);
    TORCH_INTERNAL_ASSERT(real, "openreg's glue loaded but did not register its graphs");
    return real;
  }

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override { real_->capture_begin(pool, mode); }
  void capture_end() override { real_->capture_end(); }
  void instantiate() override { real_->instantiate(); }
  void replay() override { real_->replay(); }
  void reset() override { real_->reset(); }
  at::MempoolId_t pool() const override { return real_->pool(); }
  void enable_debug_mode() override { real_->enable_debug_mode(); }
  void debug_dump(const std::string& path) override { real_->debug_dump(path); }

 private:
  std::unique_ptr<at::GraphImplInterface> real_;
};

}  // namespace
}  // namespace openreg::lazy

namespace at {
// c10::DeviceTypeName(PrivateUse1, false) once the backend is named "openreg".
C10_REGISTER_CLASS(GraphImplRegistry, OPENREG, openreg::lazy::Graph);
}  // namespace at
