#pragma once
// Devices: configuration from the environment, the per-thread current device
// (and a guard for it) and fork safety.
#include <cstddef>
#include <string>

#include "openreg/core/sanitizer.h"

namespace openreg {

struct Config {
  int device_count;          // OPENREG_DEVICE_COUNT
  std::size_t memory_bytes;  // OPENREG_DEVICE_MEMORY, per device
  bool launch_blocking;      // OPENREG_LAUNCH_BLOCKING
  bool strict;               // OPENREG_STRICT
  sanitizer::Mode sanitize;  // OPENREG_SANITIZE, where it starts (Python may change it)
};

constexpr int kMaxDevices = 64;  // the most OPENREG_DEVICE_COUNT may ask for

// Parsed once, on first use; a bad value throws an Error naming the variable.
const Config& config();

int device_count();
// Throws an Error naming the valid range when `device` is not a device index.
void check_device(int device);
int current_device();
void set_device(int device);
int exchange_device(int device);

// Makes `device` the calling thread's current device for the guard's scope,
// as c10::DeviceGuard does for PyTorch code; throws as set_device does.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : original_(exchange_device(device)) {}
  ~DeviceGuard() { set_device(original_); }  // cannot throw: original_ was current, so it is valid
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  int original_device() const { return original_; }

 private:
  const int original_;
};

// Parses sizes such as "512MiB", "8GiB", "1000000"; throws naming `variable`.
std::size_t parse_size(const std::string& text, const char* variable);

// The device counts as initialised once a worker thread or device memory
// exists; a child forked after that point cannot use it (threads are gone).
void mark_initialized();
bool is_initialized();
bool in_bad_fork();
void check_not_forked();

}  // namespace openreg
