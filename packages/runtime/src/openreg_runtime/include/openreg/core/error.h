#pragma once
// Errors raised by the simulated device. The core has no libtorch dependency,
// so it throws standard exceptions; the glue layer turns them into c10 errors.
#include <exception>
#include <stdexcept>

namespace openreg {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct OutOfMemory : Error {
  using Error::Error;
};

// A device index that names no device (CUDA's "invalid device ordinal").
struct InvalidDevice : Error {
  using Error::Error;
};

// A task's failure, raised at a later synchronising call: the message names
// the task; `cause` is what the task threw, so that a layer above can raise
// it again with its own type (an IndexError stays an IndexError).
struct AsyncError : Error {
  AsyncError(const std::string& message, std::exception_ptr cause) : Error(message), cause(std::move(cause)) {}
  std::exception_ptr cause;
};

}  // namespace openreg
