// torch.openreg.memory._record_memory_history and _snapshot, in
// torch.cuda.memory's formats (segments with their blocks, and a trace per
// device), so that torch.cuda._memory_viz and pytorch.org/memory_viz read them.
#include "memory_history.h"

#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <string_view>

#include "openreg/core/device.h"
#include "openreg/core/memory.h"
#include "openreg/glue/memory_history.h"

namespace py = pybind11;

namespace openreg::python {
namespace {

const char* state_name(DeviceMemory::BlockInfo::State state) {
  switch (state) {
    case DeviceMemory::BlockInfo::kLive:
      return "active_allocated";
    case DeviceMemory::BlockInfo::kPendingFree:
      return "active_pending_free";
    default:
      return "inactive";
  }
}

// Symbolizes every stack at once (each frame once), then hands each dict its frames.
class Frames {
 public:
  void add(py::dict d, std::shared_ptr<torch::CapturedTraceback> stack) {
    if (stack == nullptr) {
      d["frames"] = py::list();
      return;
    }
    dicts_.push_back(std::move(d));
    stacks_.push_back(stack.get());
    keep_.push_back(std::move(stack));
  }
  void fill() {
    torch::SymbolizedTracebacks symbolized = torch::symbolize(stacks_);
    py::list all;
    for (const auto& f : symbolized.all_frames) {
      py::dict frame;
      frame["filename"] = f.filename;
      frame["line"] = f.lineno;
      frame["name"] = f.funcname;
      all.append(frame);
    }
    for (size_t i = 0; i < dicts_.size(); ++i) {
      py::list frames;
      for (uint64_t index : symbolized.tracebacks[i]) frames.append(all[index]);
      dicts_[i]["frames"] = frames;
    }
  }

 private:
  std::vector<py::dict> dicts_;
  std::vector<torch::CapturedTraceback*> stacks_;
  std::vector<std::shared_ptr<torch::CapturedTraceback>> keep_;
};

py::dict snapshot() {
  Frames frames;
  py::list segments;
  py::list traces;
  for (int device = 0; device < device_count(); ++device) {
    for (const auto& b : device_memory(device).blocks()) {
      const bool active = b.state != DeviceMemory::BlockInfo::kCached;
      py::dict block;
      block["address"] = reinterpret_cast<uintptr_t>(b.ptr);
      block["size"] = b.size;
      block["requested_size"] = active ? b.requested : 0;
      block["state"] = state_name(b.state);
      frames.add(block, active ? glue::history::stack_of(b.ptr) : nullptr);
      // The rest of the block's pages, as CUDA shows what a segment holds beyond its blocks.
      py::list blocks;
      blocks.append(block);
      const std::size_t mapped = mapped_size(b.size);
      if (mapped > b.size) {
        py::dict rest;
        rest["address"] = reinterpret_cast<uintptr_t>(b.ptr) + b.size;
        rest["size"] = mapped - b.size;
        rest["requested_size"] = 0;
        rest["state"] = "inactive";
        rest["frames"] = py::list();
        blocks.append(rest);
      }
      py::dict seg;
      seg["device"] = device;
      seg["address"] = reinterpret_cast<uintptr_t>(b.ptr);
      seg["total_size"] = mapped;
      seg["allocated_size"] = b.state == DeviceMemory::BlockInfo::kLive ? b.size : 0;
      seg["active_size"] = active ? b.size : 0;
      seg["requested_size"] = active ? b.requested : 0;
      seg["stream"] = b.owner >= 0 ? b.owner : 0;
      seg["segment_type"] = b.size <= kSmallBlock ? "small" : "large";
      seg["segment_pool_id"] = py::make_tuple(0, b.owner < 0 ? -b.owner : 0);
      seg["is_expandable"] = false;
      seg["frames"] = py::list();
      seg["blocks"] = blocks;
      segments.append(seg);
    }
    traces.append(py::list());
  }
  for (const auto& e : glue::history::entries()) {
    py::dict entry;
    entry["action"] = e.action;
    entry[std::string_view(e.action) == "oom" ? "device_free" : "addr"] = e.addr;  // as torch.cuda's
    entry["size"] = e.size;
    entry["stream"] = e.stream;
    entry["time_us"] = e.time_us;
    frames.add(entry, e.frames);
    traces[e.device].cast<py::list>().append(entry);
  }
  frames.fill();
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = traces;
  return out;
}

}  // namespace

void bind_memory_history(py::module& m) {
  py::enum_<glue::history::Context>(m, "MemoryHistoryContext")
      .value("never", glue::history::Context::kNever)
      .value("state", glue::history::Context::kState)
      .value("alloc", glue::history::Context::kAlloc)
      .value("all", glue::history::Context::kAll);
  m.def("record_memory_history", &glue::history::record, py::arg("enabled"), py::arg("context"), py::arg("max_entries"),
        py::arg("skip_actions"), py::arg("clear_history"));
  m.def("memory_snapshot", &snapshot);
  m.def("is_recording_memory_history", &glue::history::recording);
}

}  // namespace openreg::python
