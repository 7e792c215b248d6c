#pragma once
#include <cstddef>

namespace openreg {

// Device memory a task reads or writes: strict mode opens it for the task's
// duration, the stream sanitizer checks the task's order against its other
// users. A pointer alone is a read: where a launcher cannot tell, a read
// gives no false report.
struct Touch {
  Touch(const void* p = nullptr, bool w = false) : ptr(p), write(w) {}  // NOLINT: implicit, a bare pointer reads
  const void* ptr;
  bool write;
};

}  // namespace openreg
