// The stream sanitizer's launch sites (core/sanitizer.h): the launching
// thread's Python stack, gathered as the memory history gathers it (frames
// kept, not printed) and printed only in a report, outside torch's and
// openreg's own files so that it points at the user's lines.
#include "openreg/core/sanitizer.h"

#include <c10/util/Exception.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <string>

namespace openreg::glue {
namespace {

constexpr int kShownFrames = 3;

bool internal(const std::string& file) {
  for (const char* dir : {"/torch/", "/openreg_runtime/", "/openreg_eager/", "/openreg_inductor/", "/openreg/"}) {
    if (file.find(dir) != std::string::npos) return true;
  }
  return file.rfind("<frozen", 0) == 0;
}

std::shared_ptr<const void> capture_site() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

std::string format_site(const void* site) {
  auto* stack = const_cast<torch::CapturedTraceback*>(static_cast<const torch::CapturedTraceback*>(site));
  torch::SymbolizedTracebacks symbolized = torch::symbolize({stack});
  std::vector<const torch::unwind::Frame*> frames;  // innermost first
  for (uint64_t i : symbolized.tracebacks.at(0)) frames.push_back(&symbolized.all_frames.at(i));
  std::vector<const torch::unwind::Frame*> shown;
  for (const auto* f : frames) {
    if (!internal(f->filename) && shown.size() < kShownFrames) shown.push_back(f);
  }
  if (shown.empty()) {
    for (size_t i = 0; i < frames.size() && i < kShownFrames; ++i) shown.push_back(frames[i]);
  }
  std::string text;
  for (auto it = shown.rbegin(); it != shown.rend(); ++it) {  // as Python prints a traceback: innermost last
    text += "    File \"" + (*it)->filename + "\", line " + std::to_string((*it)->lineno) + ", in " + (*it)->funcname +
            "\n";
  }
  return text;
}

void warn(const std::string& report) { TORCH_WARN(report); }

const bool g_hooks_set = [] {
  sanitizer::set_hooks({&capture_site, &format_site, &warn});
  return true;
}();

}  // namespace
}  // namespace openreg::glue
