#pragma once
// Strict mode (OPENREG_STRICT=1): device memory is not host-accessible outside
// kernels and copies, so a host access faults as it would on real hardware.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "openreg/core/touch.h"

namespace openreg {

// Makes device memory host-accessible for a kernel's or copy's duration in
// strict mode; costs nothing otherwise.
class HostAccess {
 public:
  HostAccess(std::initializer_list<Touch> touches) : HostAccess(touches.begin(), touches.size()) {}
  HostAccess(const Touch* touches, std::size_t n);
  ~HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

 private:
  std::vector<std::uintptr_t> segments_;
};

// The protection new device memory is mapped with: none in strict mode.
int device_protection();

// Strict mode's faults say why: a SIGSEGV handler that recognises device
// memory writes which allocation the host touched and how to find the access,
// then hands the fault on (to the previous handler, e.g. Python's faulthandler,
// or the default action), so debuggers and core dumps still see it. Other
// faults pass through untouched. Installed once.
void install_fault_report();

}  // namespace openreg
