// Device activities for torch.profiler (Kineto): each task a stream ran while
// profiling becomes a kernel (a memcpy for copies) on a track per stream,
// linked to the op that launched it. With CPU activities, the launch itself
// shows on the launching thread, with a flow arrow to its kernel, as CUDA's
// cudaLaunchKernel does. The core times the tasks (core/trace.h); Kineto's
// correlation id of the op running on the launching thread tags each one.
#ifdef USE_KINETO
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>
#include <output_base.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "openreg/core/trace.h"
#include "openreg/lazy/entry.h"

namespace openreg::glue {
namespace {

using libkineto::ActivityType;

// Kineto pushes the current op's id on the thread that runs it.
thread_local std::vector<uint64_t> t_correlation;

uint64_t current_correlation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

// The runtime's copies (glue/copy.cpp) are named "copy (...)".
bool is_copy(const char* name) { return std::strncmp(name, "copy (", 6) == 0; }

class Session final : public libkineto::IActivityProfilerSession {
 public:
  explicit Session(bool launches) : launches_(launches) {}
  // A profile abandoned while recording must not leave every task recording.
  ~Session() override {
    if (recording_) trace::stop();
  }

  void start() override {
    trace::start(&current_correlation);
    recording_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    records_ = trace::stop();
    recording_ = false;
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback op_of, int64_t start,
                    int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start, start, "openreg");
    buffer_->gpuOpCount = -1;
    std::set<std::pair<int, int>> streams;
    int32_t id = 0;
    if (!records_.empty()) first_device_ = records_.front().device;
    for (const auto& r : records_) {
      const libkineto::ITraceActivity* op = r.tag != 0 && op_of ? op_of(static_cast<int32_t>(r.tag)) : nullptr;
      const bool copy = is_copy(r.name);
      // A kernel is named after its op, which torch's tables would merge it with.
      auto& kernel = add(copy ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL,
                         copy ? std::string(r.name) : std::string(r.name) + " kernel", r.device, r.stream, r.start,
                         r.end, ++id, op);
      streams.emplace(r.device, r.stream);
      if (launches_ && r.launch_thread != 0) {
        auto& launch = add(ActivityType::PRIVATEUSE1_RUNTIME, "openregLaunch", libkineto::processId(), r.launch_thread,
                           r.launch_begin, r.launch_end, id, op);
        launch.threadId = r.launch_thread;
        link(launch, kernel);
      }
    }
    for (const auto& [d, s] : streams) {
      if (d != first_device_) logger.handleDeviceInfo(device_info(d), start);
      logger.handleResourceInfo({s, s, d, "stream " + std::to_string(s)}, start);
    }
    for (const auto& activity : buffer_->activities) logger.handleActivity(*activity);
  }

  // Kineto names the other devices' tracks (and sixteen "GPU" ones) itself only when a session names none.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(device_info(first_device_));
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  libkineto::GenericTraceActivity& add(ActivityType type, const std::string& name, int32_t device, int32_t resource,
                                       int64_t start, int64_t end, int32_t id, const libkineto::ITraceActivity* op) {
    buffer_->emplace_activity(buffer_->span, type, name);
    auto& a = *buffer_->activities.back();
    a.device = device;
    a.resource = resource;
    a.startTime = start;
    a.endTime = end;
    a.id = id;
    a.linked = op;
    return a;
  }

  // The arrow from a launch to its kernel in the trace.
  static void link(libkineto::GenericTraceActivity& launch, libkineto::GenericTraceActivity& kernel) {
    for (auto* a : {&launch, &kernel}) {
      a->flow.id = launch.id;
      a->flow.type = libkineto::kLinkAsyncCpuGpu;
      a->flow.start = a == &launch;
    }
  }

  static libkineto::DeviceInfo device_info(int device) {
    return {device, libkineto::kExceedMaxPid + device, "openreg", "openreg:" + std::to_string(device)};
  }

  const bool launches_;
  bool recording_ = false;
  int first_device_ = 0;
  std::vector<trace::Record> records_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class Profiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!types.contains(ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>(types.contains(ActivityType::PRIVATEUSE1_RUNTIME));
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t, const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"openreg"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::PRIVATEUSE1_RUNTIME};
};

const bool g_attached = [] {
  static Profiler profiler;
  lazy::attach_profiler(&profiler);
  return true;
}();

}  // namespace
}  // namespace openreg::glue
#endif  // USE_KINETO
