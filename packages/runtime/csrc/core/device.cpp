#include "openreg/core/device.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#include "openreg/core/error.h"

namespace openreg {
namespace {

int parse_count(const char* variable, int fallback) {
  const char* raw = std::getenv(variable);
  if (raw == nullptr || *raw == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(raw, &end, 10);
  if (*end != '\0' || value < 1 || value > kMaxDevices) {
    throw Error(std::string(variable) + "='" + raw + "' is not a device count: use a whole number from 1 to " +
                std::to_string(kMaxDevices) + ", or unset it for the default of 2");
  }
  return static_cast<int>(value);
}

bool parse_flag(const char* variable) {
  const char* raw = std::getenv(variable);
  if (raw == nullptr || *raw == '\0') return false;
  std::string v(raw);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error(std::string(variable) + "='" + raw + "' is not a switch: use 1 to turn it on or 0 to turn it off");
}

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};

void on_fork_child() {
  if (g_initialized.load()) g_bad_fork.store(true);
}

thread_local int t_current_device = 0;

}  // namespace

std::size_t parse_size(const std::string& text, const char* variable) {
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit = text.substr(i);
  static const std::pair<const char*, std::size_t> units[] = {{"", 1},
                                                              {"B", 1},
                                                              {"KiB", 1ull << 10},
                                                              {"MiB", 1ull << 20},
                                                              {"GiB", 1ull << 30},
                                                              {"TiB", 1ull << 40},
                                                              {"KB", 1000ull},
                                                              {"MB", 1000ull * 1000},
                                                              {"GB", 1000ull * 1000 * 1000}};
  // What a process can reserve: x86-64 and AArch64 give user space 128 TiB.
  constexpr std::size_t kMax = 1ull << 47;
  const auto* scale = std::find_if(std::begin(units), std::end(units), [&](const auto& u) { return unit == u.first; });
  if (i > 0 && scale != std::end(units)) {
    std::size_t value = 0;
    // 19 digits always fit in 64 bits; the product may not
    if (i > 19 || __builtin_mul_overflow(std::stoull(text.substr(0, i)), scale->second, &value) || value > kMax) {
      throw Error(std::string(variable) + "='" + text +
                  "' is more memory than a process can reserve: use at most "
                  "128TiB, and no more than the host's memory and swap (e.g. 8GiB)");
    }
    if (value > 0) return value;
  }
  throw Error(std::string(variable) + "='" + text +
              "' is not a memory size: write a positive whole number with an optional unit, e.g. 512MiB or 8GiB");
}

const Config& config() {
  static const Config cfg = [] {
    Config c{};
    c.device_count = parse_count("OPENREG_DEVICE_COUNT", 2);
    const char* mem = std::getenv("OPENREG_DEVICE_MEMORY");
    c.memory_bytes = (mem && *mem) ? parse_size(mem, "OPENREG_DEVICE_MEMORY") : (8ull << 30);
    c.launch_blocking = parse_flag("OPENREG_LAUNCH_BLOCKING");
    c.strict = parse_flag("OPENREG_STRICT");
    c.sanitize = sanitizer::parse_mode(std::getenv("OPENREG_SANITIZE"));
    if (c.sanitize != sanitizer::Mode::kOff) sanitizer::set_mode(c.sanitize);
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return c;
  }();
  return cfg;
}

int device_count() { return config().device_count; }

void check_device(int device) {
  int n = device_count();
  if (device < 0 || device >= n) {
    throw InvalidDevice("openreg device index " + std::to_string(device) + " is out of range: valid indices are 0 to " +
                        std::to_string(n - 1) + " (set OPENREG_DEVICE_COUNT for more devices)");
  }
}

int current_device() { return t_current_device; }

void set_device(int device) {
  check_device(device);
  t_current_device = device;
}

int exchange_device(int device) {
  int previous = t_current_device;
  set_device(device);
  return previous;
}

void mark_initialized() {
  config();  // registers the fork handler before anything can be forked
  g_initialized.store(true, std::memory_order_relaxed);
}

bool is_initialized() { return g_initialized.load(std::memory_order_relaxed); }

bool in_bad_fork() { return g_bad_fork.load(std::memory_order_relaxed); }

void check_not_forked() {
  if (in_bad_fork()) {
    // CUDA's words (which PyTorch's tests match for every accelerator), then why and the other way out.
    throw Error(
        "Cannot re-initialize openreg in forked subprocess. To use openreg with multiprocessing, you must use the "
        "'spawn' start method (multiprocessing.set_start_method('spawn')), or start using openreg only after "
        "forking: the device the parent initialised, and its worker threads, do not survive fork.");
  }
}

}  // namespace openreg
