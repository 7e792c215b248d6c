#pragma once
// Errors raised by the simulated device. The core has no libtorch dependency,
// so it throws standard exceptions; the glue layer turns them into c10 errors.
#include <stdexcept>

namespace openreg {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct OutOfMemory : Error {
  using Error::Error;
};

}  // namespace openreg
