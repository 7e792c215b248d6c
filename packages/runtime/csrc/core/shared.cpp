#include "openreg/core/shared.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "openreg/core/device.h"
#include "openreg/core/error.h"
#include "openreg/core/memory.h"
#include "openreg/core/segments.h"
#include "openreg/core/strict.h"

namespace openreg {
namespace {

std::string os_error(const char* what) { return std::string(what) + " failed: " + std::strerror(errno); }

SharedMemory map(int device, int fd, std::size_t size) {
  void* p = mmap(nullptr, size, device_protection(), MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const std::string message = os_error("mapping shared openreg memory (mmap)");
    close(fd);
    throw Error(message);
  }
  add_segment(p, size, device);
  return SharedMemory{p, size, fd, device};
}

}  // namespace

SharedMemory create_shared(int device, std::size_t size) {
  check_device(device);
  size = mapped_size(size);
  const int fd = memfd_create("openreg-shared", MFD_CLOEXEC);
  if (fd < 0) throw Error(os_error("creating shared openreg memory (memfd_create)"));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const std::string message = os_error("sizing shared openreg memory (ftruncate)");
    close(fd);
    throw Error(message);
  }
  return map(device, fd, size);
}

SharedMemory open_shared(int device, int fd, std::size_t size) {
  check_device(device);
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < size) {
    close(fd);
    throw Error("the shared openreg memory received is smaller than the " + std::to_string(size) +
                " bytes the sender described: the sending process may have exited or sent a corrupt handle");
  }
  return map(device, fd, mapped_size(size));
}

void close_shared(const SharedMemory& m) {
  remove_segment(m.ptr);
  munmap(m.ptr, m.size);
  close(m.fd);
}

}  // namespace openreg
