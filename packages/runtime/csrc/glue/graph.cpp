// torch.accelerator.Graph on openreg: at::GraphImplInterface over the core's
// graphs (core/graph.h), on the current stream of the current device.
#include "openreg/core/graph.h"

#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include <fstream>

#include "openreg/core/device.h"
#include "openreg/glue/generator.h"
#include "openreg/glue/launch.h"

namespace openreg::glue {
namespace {

CaptureMode capture_mode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::ThreadLocal:
      return CaptureMode::ThreadLocal;
    case at::GraphCaptureMode::Relaxed:
      return CaptureMode::Relaxed;
    default:
      return CaptureMode::Global;  // CUDA's default
  }
}

struct GraphImpl final : at::GraphImplInterface {
  explicit GraphImpl(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
    const int device = current_device();
    // A pool handle is (0, id); a graph's own pool, which another graph may share, is (id, 0).
    const uint64_t id = pool.first != 0 ? pool.first : pool.second;
    checked([&] { graph_.capture_begin(openreg::current_stream(device), id, capture_mode(mode)); });
    // As CUDA's: the device's default generator is registered with every capture; others, with
    // OpenRegGraph.register_generator_state().
    default_generator(device).get<Generator>()->begin_capture();
    pool_ = id != 0 ? pool : at::MempoolId_t{graph_.pool(), 0};
    instantiated_ = false;
  }
  void capture_end() override {
    checked([&] { graph_.capture_end(); });
    // CUDA's warning, for work queued on another stream or device than the one captured.
    if (graph_.empty()) {
      TORCH_WARN(
          "The openreg graph is empty. This usually means that the graph was attempted to be captured on "
          "wrong device or stream.");
    }
    instantiated_ = !keep_graph_;
  }
  void instantiate() override {
    TORCH_CHECK(keep_graph_, "openreg: instantiate() is intended to be called by the user only when keep_graph=true");
    TORCH_CHECK(graph_.captured(), "openreg: instantiate() needs a captured graph: capture one first");
    instantiated_ = true;
  }
  void replay() override {
    TORCH_CHECK(graph_.captured(),
                "openreg: replay() needs a successful capture first (capture_begin() ... capture_end())");
    if (!instantiated_) instantiate();
    checked([&] { graph_.replay(openreg::current_stream(graph_.device())); });
  }
  void reset() override {
    checked([&] { graph_.reset(); });
    pool_ = {0, 0};
    instantiated_ = false;
  }
  at::MempoolId_t pool() const override {
    TORCH_CHECK(pool_ != at::MempoolId_t(0, 0),
                "openreg: this graph has no memory pool yet: call pool() after capture_begin()");
    return pool_;
  }
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override {
    if (!debug_) {
      TORCH_WARN("openreg graph debug mode is not enabled: call enable_debug_mode() before capturing");
      return;
    }
    TORCH_CHECK(graph_.captured(), "openreg: debug_dump() needs a captured graph: capture one first");
    std::ofstream out(path);
    TORCH_CHECK(out, "openreg: cannot write the graph listing to '", path, "'");
    const auto tasks = graph_.listing();
    out << "openreg graph on openreg:" << graph_.device() << ", memory pool " << graph_.pool() << ": " << tasks.size()
        << " tasks, run in this order at each replay\n";
    for (size_t i = 0; i < tasks.size(); ++i) out << i << "\t" << tasks[i] << "\n";
  }

 private:
  Graph graph_;
  at::MempoolId_t pool_{0, 0};  // as given to capture_begin(), or the graph's own
  const bool keep_graph_;
  bool instantiated_ = false;
  bool debug_ = false;
};

}  // namespace
}  // namespace openreg::glue

namespace at {
// The lazy layer registers torch's key (it is there from `import torch` on)
// and creates this one through it.
C10_REGISTER_CLASS(GraphImplRegistry, OPENREG_GLUE, openreg::glue::GraphImpl);
}  // namespace at
