// openreg_runtime._C: what the Python device module (torch.openreg) needs
// beyond the generic torch.Stream/torch.Event/torch.accelerator APIs.
#include <dlfcn.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <thread>

#include "memory_history.h"
#include "openreg/core/c_api.h"
#include "openreg/core/device.h"
#include "openreg/core/graph.h"
#include "openreg/core/memory.h"
#include "openreg/core/segments.h"
#include "openreg/core/stream.h"
#include "openreg/core/strict.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/generator.h"
#include "openreg/glue/launch.h"
#include "openreg/glue/memory_history.h"
#include "openreg/glue/sharing.h"
#include "openreg/glue/sync_debug.h"

namespace py = pybind11;
using namespace openreg;

namespace {

py::dict counter_dict(const c10::CachingAllocator::Stat& stat) {
  py::dict s;
  s["current"] = stat.current;
  s["peak"] = stat.peak;
  s["allocated"] = stat.allocated;
  s["freed"] = stat.freed;
  return s;
}

py::dict stat_dict(const c10::CachingAllocator::StatArray& a) {
  using c10::CachingAllocator::StatType;
  static constexpr std::pair<StatType, const char*> kTypes[] = {
      {StatType::AGGREGATE, "all"}, {StatType::SMALL_POOL, "small_pool"}, {StatType::LARGE_POOL, "large_pool"}};
  py::dict out;
  for (auto [type, name] : kTypes) {
    out[name] = counter_dict(a[static_cast<std::size_t>(type)]);
  }
  return out;
}

py::dict duration_dict(const c10::CachingAllocator::DurationStat& stat) {
  py::dict s;
  s["total"] = stat.total;
  s["max"] = stat.max;
  s["min"] = stat.min;
  s["count"] = stat.count;
  s["avg"] = stat.count == 0 ? 0 : stat.total / stat.count;
  return s;
}

// The pinned host allocator's statistics, as torch.cuda.host_memory_stats_as_nested_dict gives CUDA's.
py::dict host_memory_stats() {
  at::HostStats s = glue::pinned_host_allocator()->get_stats();
  py::dict out;
  out["allocations"] = counter_dict(s.allocations);
  out["allocated_bytes"] = counter_dict(s.allocated_bytes);
  out["active_requests"] = counter_dict(s.active_requests);
  out["active_bytes"] = counter_dict(s.active_bytes);
  out["host_alloc_time"] = duration_dict(s.host_alloc_time);
  out["host_free_time"] = duration_dict(s.host_free_time);
  out["num_host_alloc"] = s.num_host_alloc;
  out["num_host_free"] = s.num_host_free;
  return out;
}

py::dict memory_stats(int device) {
  auto s = glue::device_stats(static_cast<c10::DeviceIndex>(device));
  py::dict out;
  out["allocation"] = stat_dict(s.allocation);
  out["segment"] = stat_dict(s.segment);
  out["active"] = stat_dict(s.active);
  out["allocated_bytes"] = stat_dict(s.allocated_bytes);
  out["reserved_bytes"] = stat_dict(s.reserved_bytes);
  out["active_bytes"] = stat_dict(s.active_bytes);
  out["requested_bytes"] = stat_dict(s.requested_bytes);
  out["inactive_split"] = stat_dict(s.inactive_split);
  out["inactive_split_bytes"] = stat_dict(s.inactive_split_bytes);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_sync_all_streams"] = s.num_sync_all_streams;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  return out;
}

// Without the GIL, as torch's waits are; what queued kernels warned becomes Python's warnings.
template <typename F>
auto unlocked(F&& f) {
  auto wrapped = torch::wrap_pybind_function_no_gil([&] { return glue::checked(f); });
  return wrapped();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  // Compiled kernels find the C ABI by name (see c_api.h): put the core library in the global scope.
  Dl_info core;
  if (dladdr(reinterpret_cast<void*>(&openreg_launch_host_fn), &core) && core.dli_fname) {
    dlopen(core.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  }
  m.attr("DEVICE_TYPE") = static_cast<int>(c10::DeviceType::PrivateUse1);  // what torch.Stream takes
  m.def("config", torch::wrap_pybind_function([] {
          const Config& c = glue::checked([]() -> const Config& { return config(); });
          py::dict d;
          d["device_count"] = c.device_count;
          d["memory_bytes"] = c.memory_bytes;
          d["launch_blocking"] = c.launch_blocking;
          d["strict"] = c.strict;
          d["sanitize"] = static_cast<int>(c.sanitize);
          return d;
        }));
  m.def("device_count", torch::wrap_pybind_function([] { return glue::checked([] { return device_count(); }); }));
  m.def("current_device", [] { return current_device(); });
  m.def("set_device", torch::wrap_pybind_function([](int d) { glue::checked([&] { set_device(d); }); }));
  m.def("current_stream",
        torch::wrap_pybind_function([](int d) { return glue::checked([&] { return current_stream(d).id(); }); }));
  m.def("set_stream",
        torch::wrap_pybind_function([](int d, int id) { glue::checked([&] { set_current_stream(d, id); }); }));
  m.def("stream_priority", [](int id) { return stream_priority(id); });
  m.attr("PRIORITY_RANGE") = py::make_tuple(0, 1 - kPriorities);  // (least, greatest), as CUDA orders them
  m.def("install_fault_report", &install_fault_report);
  m.def("init", torch::wrap_pybind_function([] { glue::checked(mark_initialized); }));
  // torch.multiprocessing (openreg_runtime.multiprocessing): a tensor's storage as (descriptor, bytes), and back.
  m.def("share", [](const at::Tensor& t) {
    py::gil_scoped_release no_gil;
    glue::SharedHandle h = glue::share(t.storage());
    return std::make_pair(h.fd, h.nbytes);
  });
  m.def("open_shared", [](int fd, size_t nbytes, int device) {
    c10::Storage storage = glue::open_shared(fd, nbytes, static_cast<c10::DeviceIndex>(device));
    return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(storage.device())).set_(storage);
  });
  m.def("is_initialized", &is_initialized);
  m.def("in_bad_fork", &in_bad_fork);
  m.def("check_not_forked", torch::wrap_pybind_function([] { glue::checked(check_not_forked); }));
  m.def(
      "synchronize", [](int device) { unlocked([&] { synchronize_device(device); }); },
      "Waits for every stream of `device` (all devices if negative).");
  m.def("set_sync_debug_mode", [](int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected one of 0, 1, 2 (got ", mode, ")");
    glue::set_sync_debug_mode(static_cast<glue::SyncDebugMode>(mode));
  });
  m.def("get_sync_debug_mode", [] { return static_cast<int>(glue::sync_debug_mode()); });
  m.def("set_stream_sanitizer", [](int mode) { sanitizer::set_mode(static_cast<sanitizer::Mode>(mode)); });
  m.def("get_stream_sanitizer", [] { return static_cast<int>(sanitizer::mode()); });

  m.def("graph_pool_handle", [] { return py::make_tuple(0, new_graph_pool()); });
  // Memory pools (device/pools.py): a pool stays in use, its cached blocks its own, while it has users.
  m.def("use_pool", torch::wrap_pybind_function(
                        [](int d, uint64_t pool) { glue::checked([&] { device_memory(d).use_pool(pool); }); }));
  m.def("release_pool", [](int d, uint64_t pool) { device_memory(d).release_pool(pool); });
  m.def("pool_users", [](int d, uint64_t pool) { return device_memory(d).pool_users(pool); });
  m.def("lend_on_oom", [](int d, uint64_t pool) { device_memory(d).lend_on_oom(pool); });
  // Routes the calling thread's allocations on `d` to `pool` (0: as usual); returns the pool routed to before.
  // A graph captured meanwhile keeps the pool in use.
  m.def("route_to_pool", torch::wrap_pybind_function([](int d, uint64_t pool) {
          return glue::checked([&] {
            if (pool != 0) retain_pool(current_stream(d), pool);
            return allocate_to_pool(d, pool);
          });
        }));
  m.def("is_capturing", torch::wrap_pybind_function(
                            [](int d) { return glue::checked([&] { return is_capturing(current_stream(d)); }); }));

  m.def("memory_stats", &memory_stats);
  m.def("host_memory_stats", &host_memory_stats);
  m.def("reset_accumulated_host_memory_stats", [] { glue::pinned_host_allocator()->reset_accumulated_stats(); });
  m.def("reset_peak_host_memory_stats", [] { glue::pinned_host_allocator()->reset_peak_stats(); });
  openreg::python::bind_memory_history(m);
  m.def("reset_peak_memory_stats", [](int d) { glue::device_allocator()->resetPeakStats(d); });
  m.def("reset_accumulated_memory_stats", [](int d) { glue::device_allocator()->resetAccumulatedStats(d); });
  m.def(
      "empty_cache",
      [](int d, uint64_t pool) {  // pool 0: every pool not in use
        unlocked([&] { device_memory(d).empty_cache(pool); });
        if (glue::history::recording()) glue::history::note_segments(d);  // with this call's stack
      },
      py::arg("device"), py::arg("pool") = 0);
  m.def("mem_get_info", [](int d) { return glue::device_allocator()->getMemoryInfo(d); });
  m.def("set_memory_fraction",
        torch::wrap_pybind_function([](int d, double f) { glue::checked([&] { device_memory(d).set_fraction(f); }); }));
  m.def("memory_fraction",
        torch::wrap_pybind_function([](int d) { return glue::checked([&] { return device_memory(d).fraction(); }); }));
  m.def("caching_allocator_alloc", [](size_t nbytes, int d, int stream) {
    return reinterpret_cast<uintptr_t>(unlocked([&] { return device_memory(d).malloc(nbytes, stream); }));
  });
  m.def("caching_allocator_delete", torch::wrap_pybind_function([](uintptr_t ptr) {
          void* p = reinterpret_cast<void*>(ptr);
          int device = device_of(p);
          TORCH_CHECK(device >= 0, "invalid device pointer: ", p,
                      " is not openreg memory from caching_allocator_alloc");
          glue::checked([&] { device_memory(device).free(p); });
        }));

  // torch.Event.elapsed_time accepts only exact torch.Event arguments, not
  // torch.openreg.Event, so the subclass times through here.
  m.def("elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK_TYPE(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()), "elapsed_time takes two events");
    return reinterpret_cast<THPEvent*>(start.ptr())->event.elapsedTime(reinterpret_cast<THPEvent*>(end.ptr())->event);
  });
  m.def("begin_capture", torch::wrap_pybind_function([](py::handle generator) {
          TORCH_CHECK_TYPE(THPGenerator_Check(generator.ptr()), "begin_capture takes a torch.Generator");
          const at::Generator& gen = reinterpret_cast<THPGenerator*>(generator.ptr())->cdata;
          TORCH_CHECK_TYPE(gen.device().type() == c10::DeviceType::PrivateUse1,
                           "begin_capture takes an openreg generator, not one on ", gen.device());
          gen.get<glue::Generator>()->begin_capture();
        }));
  m.def("default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(glue::default_generator(static_cast<c10::DeviceIndex>(d))));
  });

  // Device-side work for tests and examples, like torch.cuda._sleep: a task
  // that keeps the stream busy, one that fails, one that warns. Calls that
  // reach glue::checked pass on what queued kernels warned: they go through
  // torch's wrapper, so that it becomes Python's warnings.
  m.def("_sleep", torch::wrap_pybind_function([](int64_t cycles) {  // of a nominal 1 GHz clock
          int d = current_device();
          glue::checked([&] {
            current_stream(d).launch("sleep",
                                     [cycles] { std::this_thread::sleep_for(std::chrono::nanoseconds(cycles)); });
          });
        }));
  m.def("_fail", torch::wrap_pybind_function([](std::string message) {
          int d = current_device();
          glue::checked([&] { current_stream(d).launch("injected failure", [message] { throw Error(message); }); });
        }));
  m.def("_warn", torch::wrap_pybind_function([](std::string message) {
          glue::launch(static_cast<c10::DeviceIndex>(current_device()), "injected warning", {},
                       [message] { TORCH_WARN(message); });
        }));
}
